package gymmetrics

import (
	"context"
	"fmt"
	"io"

	pb "github.com/gym-metrics/gym-metrics/clients/go/gymmetricsv1"
)

// Verified is a rollout and what verify answered for it.
type Verified struct {
	Rollout
	Reward float64
	// ResponseJSON is the full verify response ("" when the rollout failed verification).
	ResponseJSON string
	ErrorKind    pb.VerifyErrorKind
	ErrorMessage string
}

// VerifyAll verifies rollouts over one VerifyStream call, in batches of batchSize (256 when
// 0), and answers them in input order. Each batch has its own id ("b<n>"): a batch sent again
// after a broken stream is answered from the server's cache, not verified twice. The server
// answers each rollout as it finishes (AnswerEach: one slow verify holds back only itself), in
// parts carrying their Positions; a batch finished whole comes in order, in parts (More) when it
// passes the message limit.
func VerifyAll(ctx context.Context, client pb.ResourcesServiceClient, rollouts []Rollout, batchSize int) ([]Verified, error) {
	if batchSize <= 0 {
		batchSize = 256
	}
	stream, err := client.VerifyStream(ctx)
	if err != nil {
		return nil, err
	}
	sent := make(chan error, 1)
	go func() {
		for start, n := 0, 0; start < len(rollouts); start, n = start+batchSize, n+1 {
			end := start + batchSize
			if end > len(rollouts) {
				end = len(rollouts)
			}
			request := &pb.VerifyStreamRequest{BatchId: fmt.Sprintf("b%d", n), AnswerEach: true}
			for _, r := range rollouts[start:end] {
				request.Items = append(request.Items, &pb.VerifyItem{TaskIndex: r.TaskIndex, RolloutIndex: r.RolloutIndex, BodyJson: string(r.Row)})
			}
			if err := stream.Send(request); err != nil {
				sent <- err
				return
			}
		}
		sent <- stream.CloseSend()
	}()
	out := make([]Verified, len(rollouts))
	before := map[string]int{} // results of a batch answered whole in parts so far (More, no Positions)
	for received := 0; received < len(rollouts); {
		answer, err := stream.Recv()
		if err == io.EOF {
			return nil, fmt.Errorf("VerifyStream ended after %d of %d rollouts", received, len(rollouts))
		}
		if err != nil {
			return nil, err
		}
		var n int
		if _, err := fmt.Sscanf(answer.BatchId, "b%d", &n); err != nil {
			return nil, fmt.Errorf("VerifyStream answered an unknown batch %q", answer.BatchId)
		}
		offset := before[answer.BatchId]
		if len(answer.Positions) == 0 {
			if answer.More {
				before[answer.BatchId] = offset + len(answer.Results)
			} else {
				delete(before, answer.BatchId)
			}
		} else if len(answer.Positions) != len(answer.Results) {
			return nil, fmt.Errorf("batch %q answered %d results with %d positions", answer.BatchId, len(answer.Results), len(answer.Positions))
		}
		for i, result := range answer.Results {
			at := n*batchSize + offset + i
			if len(answer.Positions) > 0 {
				at = n*batchSize + int(answer.Positions[i])
			}
			if at >= len(rollouts) {
				return nil, fmt.Errorf("batch %q answered more results than it had rollouts", answer.BatchId)
			}
			out[at] = Verified{Rollout: rollouts[at], Reward: result.Reward, ResponseJSON: result.ResponseJson,
				ErrorKind: result.ErrorKind, ErrorMessage: result.ErrorMessage}
			received++
		}
	}
	if err := <-sent; err != nil && err != io.EOF {
		return nil, err
	}
	return out, nil
}
