package gymmetrics

import (
	"context"
	"regexp"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gym-metrics/gym-metrics/clients/go/gymmetricsv1"
)

// flakyJobs stores each submission it is sent but loses the answer of the first (UNAVAILABLE),
// as a connection broken after the job was stored does; it answers a request_id it has seen
// with the job it stored.
type flakyJobs struct {
	pb.UnimplementedJobServiceServer
	mu   sync.Mutex
	seen []string
	jobs map[string]string
}

func (f *flakyJobs) SubmitJob(ctx context.Context, request *pb.SubmitJobRequest) (*pb.SubmitJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, request.RequestId)
	id, ok := f.jobs[request.RequestId]
	if !ok {
		id = "job-" + request.RequestId[:8]
		f.jobs[request.RequestId] = id
	}
	if len(f.seen) == 1 {
		return nil, status.Error(codes.Unavailable, "connection broken after the job was stored")
	}
	return &pb.SubmitJobResponse{Job: &pb.Job{JobId: id}}, nil
}

func TestASubmissionWhoseAnswerWasLostIsSentAgainWithItsRequestID(t *testing.T) {
	fake := &flakyJobs{jobs: map[string]string{}}
	conn := serveOnLoopback(t, func(s *grpc.Server) { pb.RegisterJobServiceServer(s, fake) })
	answer, err := Submit(context.Background(), pb.NewJobServiceClient(conn), &pb.JobSpec{Scorer: "exact_match"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fake.seen) != 2 || fake.seen[0] != fake.seen[1] || len(fake.jobs) != 1 {
		t.Fatalf("sent %v, stored %v: want one request_id sent twice and one job", fake.seen, fake.jobs)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(fake.seen[0]) {
		t.Fatalf("request_id %q is not a UUID4", fake.seen[0])
	}
	if answer.Job.JobId != fake.jobs[fake.seen[0]] {
		t.Fatalf("answered %s", answer.Job.JobId)
	}
}
