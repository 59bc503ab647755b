package gymmetrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	pb "github.com/gym-metrics/gym-metrics/clients/go/gymmetricsv1"
)

// MaxMessageBytes is the largest gRPC message a gym-metrics server takes and sends (its
// --max-message-mb, 64 MiB by default); Dial sets the client's limits to it.
const MaxMessageBytes = 64 << 20

var (
	// MaxBatchBytes bounds the row text one VerifyStream or AggregateMetrics batch carries
	// (beyond one row), as the Python client does: well under the message limit.
	MaxBatchBytes = 16 << 20
	// MaxRowBytes is the largest row one message carries (the message limit, less room for the
	// message's own fields); a longer row is an error naming its line.
	MaxRowBytes = MaxMessageBytes - 64<<10
)

// Verified is a rollout and what verify answered for it.
type Verified struct {
	Rollout
	Reward float64
	// ResponseJSON is the full verify response ("" when the rollout failed verification, or
	// was finished already and so not verified again).
	ResponseJSON string
	ErrorKind    pb.VerifyErrorKind
	ErrorMessage string
}

// span is a batch: positions [start, end) of the rollouts sent.
type span struct{ start, end int }

// batches splits n rows into consecutive batches of at most size rows and, beyond one row,
// MaxBatchBytes of text; a row past MaxRowBytes is an error naming its line.
func batches(n, size int, rowBytes func(i int) int, line func(i int) int, what string) ([]span, error) {
	var out []span
	bytes := 0
	for i := 0; i < n; i++ {
		b := rowBytes(i)
		if b > MaxRowBytes {
			return nil, fmt.Errorf("line %d: %s is %.1f MB of JSON, past the %.1f MB one gRPC message carries (the server's limit)",
				line(i), what, float64(b)/(1<<20), float64(MaxRowBytes)/(1<<20))
		}
		if len(out) == 0 || out[len(out)-1].end-out[len(out)-1].start >= size || bytes+b > MaxBatchBytes {
			out = append(out, span{i, i})
			bytes = 0
		}
		out[len(out)-1].end = i + 1
		bytes += b
	}
	return out, nil
}

// VerifyAll verifies rollouts over one VerifyStream call, in batches of at most batchSize
// rollouts (256 when 0) and MaxBatchBytes of rows, and answers them in input order. A finished
// rollout (Finished) is not sent: its answer is its own reward. Each batch has its own id
// ("b<n>"): a batch sent again after a broken stream is answered from the server's cache, not
// verified twice. The server answers each rollout as it finishes (AnswerEach: one slow verify
// holds back only itself), in parts carrying their Positions; a batch finished whole comes in
// order, in parts (More) when it passes the message limit. The call is read to its end, so an
// error status after the last answer is an error too; on any error the call is cancelled.
func VerifyAll(ctx context.Context, client pb.ResourcesServiceClient, rollouts []Rollout, batchSize int) ([]Verified, error) {
	if batchSize <= 0 {
		batchSize = 256
	}
	out := make([]Verified, len(rollouts))
	var todo []int // positions in rollouts of those to verify
	for i, r := range rollouts {
		if r.Finished {
			out[i] = Verified{Rollout: r, Reward: storedReward(r.Row)}
		} else {
			todo = append(todo, i)
		}
	}
	spans, err := batches(len(todo), batchSize, func(i int) int { return len(rollouts[todo[i]].Row) },
		func(i int) int { return rollouts[todo[i]].Line }, "the row")
	if err != nil || len(todo) == 0 {
		return out, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the call, and so a Send still blocked, whatever happens below
	stream, err := client.VerifyStream(ctx)
	if err != nil {
		return nil, err
	}
	sent := make(chan error, 1) // buffered: the sender never waits for a reader that left
	go func() {
		for n, s := range spans {
			request := &pb.VerifyStreamRequest{BatchId: fmt.Sprintf("b%d", n), AnswerEach: true}
			for _, at := range todo[s.start:s.end] {
				r := rollouts[at]
				request.Items = append(request.Items, &pb.VerifyItem{TaskIndex: r.TaskIndex, RolloutIndex: r.RolloutIndex, BodyJson: string(r.Row)})
			}
			if err := stream.Send(request); err != nil {
				sent <- err // io.EOF: the call ended; Recv says why
				return
			}
		}
		sent <- stream.CloseSend()
	}()
	before := map[string]int{} // results of a batch answered whole in parts so far (More, no Positions)
	for received := 0; received < len(todo); {
		answer, err := stream.Recv()
		if err == io.EOF {
			return nil, fmt.Errorf("VerifyStream ended after %d of %d rollouts", received, len(todo))
		}
		if err != nil {
			return nil, err
		}
		var n int
		if _, err := fmt.Sscanf(answer.BatchId, "b%d", &n); err != nil || n < 0 || n >= len(spans) {
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
		s := spans[n]
		for i, result := range answer.Results {
			at := s.start + offset + i
			if len(answer.Positions) > 0 {
				at = s.start + int(answer.Positions[i])
			}
			if at < s.start || at >= s.end {
				return nil, fmt.Errorf("batch %q answered more results than it had rollouts", answer.BatchId)
			}
			out[todo[at]] = Verified{Rollout: rollouts[todo[at]], Reward: result.Reward, ResponseJSON: result.ResponseJson,
				ErrorKind: result.ErrorKind, ErrorMessage: result.ErrorMessage}
			received++
		}
	}
	// Every answer is in: read on to the end, where a non-OK status is an error.
	for {
		answer, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("VerifyStream answered batch %q after every rollout was answered", answer.BatchId)
	}
	if err := <-sent; err != nil && err != io.EOF {
		return nil, err
	}
	return out, nil
}

// RowReward is a finished row's `reward` as its line spells it: text stays text (which Reward,
// a number, reads as 0), so what a client prints is what `gym-metrics collect` writes.
func RowReward(row json.RawMessage) json.RawMessage {
	var head struct {
		Reward json.RawMessage `json:"reward"`
	}
	_ = json.Unmarshal(row, &head)
	return head.Reward
}

// storedReward is a finished row's reward as a number (true/false 1/0; 0 when not a number).
func storedReward(row json.RawMessage) float64 {
	var head struct {
		Reward interface{} `json:"reward"`
	}
	_ = json.Unmarshal(row, &head)
	switch v := head.Reward.(type) {
	case float64:
		return v
	case bool:
		if v {
			return 1
		}
	}
	return 0
}
