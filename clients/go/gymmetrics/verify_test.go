package gymmetrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gym-metrics/gym-metrics/clients/go/gymmetricsv1"
)

// fakeServer answers each VerifyStream batch whole (reward 1), records the batch sizes, and
// ends the call with `final` (nil: OK).
type fakeServer struct {
	pb.UnimplementedResourcesServiceServer
	mu      sync.Mutex
	batches []int
	final   error
}

func (f *fakeServer) VerifyStream(stream pb.ResourcesService_VerifyStreamServer) error {
	for {
		request, err := stream.Recv()
		if err == io.EOF {
			return f.final
		}
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.batches = append(f.batches, len(request.Items))
		f.mu.Unlock()
		answer := &pb.VerifyStreamResponse{BatchId: request.BatchId}
		for range request.Items {
			answer.Results = append(answer.Results, &pb.VerifyResult{Reward: 1, ResponseJson: `{"reward":1.0}`})
		}
		if err := stream.Send(answer); err != nil {
			return err
		}
	}
}

func serveFake(t *testing.T, f *fakeServer) pb.ResourcesServiceClient {
	return pb.NewResourcesServiceClient(serveOnLoopback(t, func(s *grpc.Server) { pb.RegisterResourcesServiceServer(s, f) }))
}

// serveOnLoopback serves what register registers on 127.0.0.1 for the test, and dials it.
func serveOnLoopback(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes))
	register(server)
	go server.Serve(listener)
	conn, err := Dial(listener.Addr().String(), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); server.Stop() })
	return conn
}

func rowsOf(n, size int) []Rollout {
	out := make([]Rollout, n)
	for i := range out {
		out[i] = Rollout{Agent: "a", TaskIndex: int64(i), Line: i + 1,
			Row: json.RawMessage(fmt.Sprintf(`{"agent_ref":{"name":"a"},"pad":"%s"}`, strings.Repeat("x", size)))}
	}
	return out
}

func TestBatchesAreCappedByBytes(t *testing.T) {
	defer func(saved int) { MaxBatchBytes = saved }(MaxBatchBytes)
	MaxBatchBytes = 3500 // three 1 KB rows a batch, not 256
	f := &fakeServer{}
	verified, err := VerifyAll(context.Background(), serveFake(t, f), rowsOf(10, 1000), 0)
	if err != nil || len(verified) != 10 || verified[9].Reward != 1 {
		t.Fatalf("VerifyAll: %v", err)
	}
	if fmt.Sprint(f.batches) != "[3 3 3 1]" {
		t.Fatalf("batches of %v rows, expected [3 3 3 1]", f.batches)
	}
}

func TestARowPastTheMessageLimitNamesItsLine(t *testing.T) {
	defer func(saved int) { MaxRowBytes = saved }(MaxRowBytes)
	MaxRowBytes = 1500
	rows := rowsOf(3, 1000)
	rows[2] = rowsOf(1, 2000)[0]
	rows[2].Line = 7
	_, err := VerifyAll(context.Background(), serveFake(t, &fakeServer{}), rows, 0)
	if err == nil || !strings.Contains(err.Error(), "line 7: the row is") {
		t.Fatalf("expected an error naming line 7, got %v", err)
	}
}

func TestAnErrorStatusAfterTheLastAnswerIsAnError(t *testing.T) {
	f := &fakeServer{final: status.Error(codes.DataLoss, "the server lost its cache")}
	_, err := VerifyAll(context.Background(), serveFake(t, f), rowsOf(2, 10), 0)
	if status.Code(err) != codes.DataLoss {
		t.Fatalf("expected the call's DATA_LOSS status, got %v", err)
	}
}

func TestVerifyAllLeavesNoGoroutine(t *testing.T) {
	client := serveFake(t, &fakeServer{})
	rows := rowsOf(3, 10)
	if _, err := VerifyAll(context.Background(), client, rows, 0); err != nil { // the connection's own goroutines start
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		if _, err := VerifyAll(context.Background(), client, rows, 0); err != nil {
			t.Fatal(err)
		}
	}
	var after int
	for wait := 0; wait < 40; wait++ { // goroutines end a moment after their call
		if after = runtime.NumGoroutine(); after <= before+2 {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%d goroutines before 20 calls, %d after", before, after)
}

// A server that fails the call at its first batch while the client still sends: the sender
// must not stay blocked (the call is cancelled when VerifyAll returns).
type failingServer struct {
	pb.UnimplementedResourcesServiceServer
}

func (failingServer) VerifyStream(stream pb.ResourcesService_VerifyStreamServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	return status.Error(codes.ResourceExhausted, "too much")
}

func TestAFailedCallLeavesNoSenderBehind(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes))
	pb.RegisterResourcesServiceServer(server, failingServer{})
	go server.Serve(listener)
	defer server.Stop()
	conn, _ := Dial(listener.Addr().String(), DialOptions{})
	defer conn.Close()
	client := pb.NewResourcesServiceClient(conn)
	rows := rowsOf(64, 100_000) // 6.4 MB: more than the HTTP/2 windows take before the server reads
	_, _ = VerifyAll(context.Background(), client, rows, 2)
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		if _, err := VerifyAll(context.Background(), client, rows, 2); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("expected RESOURCE_EXHAUSTED, got %v", err)
		}
	}
	var after int
	for wait := 0; wait < 40; wait++ {
		if after = runtime.NumGoroutine(); after <= before+2 {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%d goroutines before 5 failed calls, %d after", before, after)
}

func writeLines(t *testing.T, text string) string {
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func keys(t *testing.T, text string) string {
	rollouts, err := ReadRollouts(writeLines(t, text))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rollouts {
		out = append(out, fmt.Sprintf("%d/%d/%v", r.TaskIndex, r.RolloutIndex, r.Finished))
	}
	return strings.Join(out, " ")
}

func TestLinesAreComparedWithTheirEnding(t *testing.T) {
	a := `{"agent_ref":{"name":"a"},"q":"A"}`
	if got := keys(t, a+"\n"+a+"\r\n"+a); got != "0/0/false 0/1/false 1/0/false" {
		t.Fatalf("CRLF is a newline, a last line without one is another task: got %s", got)
	}
}

func TestFinishedRolloutsKeepTheirKeys(t *testing.T) {
	text := `{"agent_ref":{"name":"a"},"_ng_task_index":0,"_ng_rollout_index":1,"reward":0.5}
{"agent_ref":{"name":"a"},"_ng_task_index":0}
{"agent_ref":{"name":"a"},"_ng_task_index":0,"reward":1.0}
{"agent_ref":{"name":"a"},"task_index":3,"rollout_index":5,"reward":0}
`
	if got := keys(t, text); got != "0/1/true 0/0/false 0/2/true 3/5/true" {
		t.Fatalf("got %s", got)
	}
	_, err := ReadRollouts(writeLines(t, text+`{"agent_ref":{"name":"a"},"task_index":3,"_ng_rollout_index":5,"reward":1}`+"\n"))
	if err == nil || !strings.Contains(err.Error(), `:5: rollouts given twice: ("a", 3, 5) again (first at line 4)`) {
		t.Fatalf("a key on two lines: %v", err)
	}
}

func TestATaskIndexMustBeAnInteger(t *testing.T) {
	for value, want := range map[string]string{
		`"3"`: `:1: _ng_task_index: must be an integer, got "3"`, `true`: `:1: _ng_task_index: must be an integer, got true`,
		`1.5`: `:1: _ng_task_index: must be an integer, got 1.5`, `-1`: `:1: _ng_task_index: must be >= 0, got -1`,
		`9223372036854775808`: `:1: _ng_task_index: must be at most`,
	} {
		_, err := ReadRollouts(writeLines(t, `{"agent_ref":{"name":"a"},"_ng_task_index":`+value+"}\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("_ng_task_index %s: expected %q, got %v", value, want, err)
		}
	}
	if got := keys(t, `{"agent_ref":{"name":"a"},"_ng_task_index":2.0}`+"\n"); got != "2/0/false" {
		t.Fatalf("2.0 is 2: got %s", got)
	}
}
