package gymmetrics

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gym-metrics/gym-metrics/clients/go/gymmetricsv1"
)

// JobResult is a finished job's result as `gym-metrics evaluate` writes it.
type JobResult struct {
	Job             *pb.Job
	AggregateScores []json.RawMessage `json:"aggregate_scores"`
	RowScores       []json.RawMessage `json:"row_scores"`
}

// SubmitAttempts is how many times Submit sends a submission whose answer did not come.
const SubmitAttempts = 3

// Submit queues spec with a fresh request_id (a UUID4), and sends the same request again when
// its answer did not come (UNAVAILABLE: a broken connection): the server answers the job the
// first attempt stored, never a second one (SubmitJobRequest.request_id, AIP-155).
func Submit(ctx context.Context, client pb.JobServiceClient, spec *pb.JobSpec) (*pb.SubmitJobResponse, error) {
	request := &pb.SubmitJobRequest{Spec: spec, RequestId: NewRequestID()}
	for attempt := 1; ; attempt++ {
		answer, err := client.SubmitJob(ctx, request)
		if err == nil || attempt == SubmitAttempts || ctx.Err() != nil {
			return answer, err
		}
		if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
}

// NewRequestID is a random UUID4, as SubmitJobRequest.request_id takes it.
func NewRequestID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// SubmitAndWait submits spec (Submit), follows WatchJob until the job reaches a final state (calling
// progress, when not nil, with each message), and reads its result through GetJobResult.
func SubmitAndWait(ctx context.Context, client pb.JobServiceClient, spec *pb.JobSpec, progress func(*pb.Job)) (*JobResult, error) {
	submitted, err := Submit(ctx, client, spec)
	if err != nil {
		return nil, err
	}
	id := submitted.GetJob().GetJobId()
	watch, err := client.WatchJob(ctx, &pb.WatchJobRequest{JobId: id})
	if err != nil {
		return nil, err
	}
	var job *pb.Job
	for {
		message, err := watch.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		job = message.GetJob()
		if progress != nil {
			progress(job)
		}
	}
	if job == nil {
		return nil, fmt.Errorf("WatchJob of %s ended without a message", id)
	}
	if job.State != pb.JobState_JOB_STATE_SUCCEEDED {
		return &JobResult{Job: job}, fmt.Errorf("job %s ended %s: %s", id, job.State, job.Error)
	}
	parts, err := client.GetJobResult(ctx, &pb.GetJobResultRequest{JobId: id})
	if err != nil {
		return nil, err
	}
	result := &JobResult{Job: job}
	for {
		part, err := parts.Recv()
		if err == io.EOF {
			return result, nil
		}
		if err != nil {
			return nil, err
		}
		switch p := part.Part.(type) {
		case *pb.GetJobResultResponse_AggregateScoresJson:
			if err := json.Unmarshal([]byte(p.AggregateScoresJson), &result.AggregateScores); err != nil {
				return nil, fmt.Errorf("aggregate_scores: %v", err)
			}
		case *pb.GetJobResultResponse_RowScores:
			for _, row := range p.RowScores.RowsJson {
				result.RowScores = append(result.RowScores, json.RawMessage(row))
			}
		}
	}
}

// FieldViolations are the bad fields an INVALID_ARGUMENT answer names (its google.rpc
// BadRequest detail), as "field: why"; nil for any other error.
func FieldViolations(err error) []string {
	var out []string
	for _, detail := range status.Convert(err).Details() {
		if bad, ok := detail.(*errdetails.BadRequest); ok {
			for _, v := range bad.FieldViolations {
				out = append(out, v.Field+": "+v.Description)
			}
		}
	}
	return out
}
