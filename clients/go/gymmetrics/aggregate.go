package gymmetrics

import (
	"context"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/proto"

	pb "github.com/gym-metrics/gym-metrics/clients/go/gymmetricsv1"
)

// Aggregate sends one agent's verified rollouts through AggregateMetrics, as rows (the
// server reads their numeric fields, docs/metrics.md#numeric-fields), in batches of at most
// batchSize rows (10,000 when 0) and MaxBatchBytes of row text, and answers the agent's
// metrics with its parts reassembled. A row past MaxRowBytes is an error naming its line.
func Aggregate(ctx context.Context, client pb.ResourcesServiceClient, agent string, verified []Verified,
	options *pb.AggregateOptions, batchSize int) (*pb.AggregateMetricsResponse, error) {
	if batchSize <= 0 {
		batchSize = 10_000
	}
	var mine []Verified
	var rows []string
	for _, v := range verified {
		if v.Agent == agent {
			row, err := WrittenRow(v.Rollout, v.ResponseJSON)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", v.Line, err)
			}
			mine, rows = append(mine, v), append(rows, string(row))
		}
	}
	spans, err := batches(len(mine), batchSize, func(i int) int { return len(rows[i]) }, func(i int) int { return mine[i].Line }, "the written row")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.AggregateMetrics(ctx)
	if err != nil {
		return nil, err
	}
	header := &pb.AggregateMetricsHeader{AgentRef: &pb.AgentRef{Name: agent}, Options: options}
	if err := stream.Send(&pb.AggregateMetricsRequest{Payload: &pb.AggregateMetricsRequest_Header{Header: header}}); err != nil {
		return nil, recvError(stream, err)
	}
	for n, s := range spans {
		batch := &pb.RolloutBatch{BatchId: fmt.Sprintf("a%d", n)}
		anyFailed := false
		for i, v := range mine[s.start:s.end] {
			batch.TaskIndex = append(batch.TaskIndex, v.TaskIndex)
			batch.RolloutIndex = append(batch.RolloutIndex, v.RolloutIndex)
			batch.RowJson = append(batch.RowJson, rows[s.start+i])
			batch.ErrorKind = append(batch.ErrorKind, v.ErrorKind)
			anyFailed = anyFailed || v.ErrorKind != pb.VerifyErrorKind_VERIFY_ERROR_KIND_UNSPECIFIED
		}
		if !anyFailed {
			batch.ErrorKind = nil // empty means every row verified
		}
		if err := stream.Send(&pb.AggregateMetricsRequest{Payload: &pb.AggregateMetricsRequest_Batch{Batch: batch}}); err != nil {
			return nil, recvError(stream, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	var parts []*pb.AggregateMetricsResponse
	for {
		part, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	return Reassemble(parts)
}

// recvError is why a call's Send failed: io.EOF means the server ended the call, and its
// status (read by Recv) says why.
func recvError(stream pb.ResourcesService_AggregateMetricsClient, err error) error {
	if err != io.EOF {
		return err
	}
	for {
		if _, recvErr := stream.Recv(); recvErr != nil {
			if recvErr == io.EOF {
				return err
			}
			return recvErr
		}
	}
}

// Reassemble joins the parts of one AggregateMetrics answer into one: the first part holds
// every field and the first tasks; each later part holds the next tasks' group_level_metrics
// and their rollout_infos. A per-task stats key absent from a part is NaN for that part's
// tasks; a rollout_infos column absent from a part is missing for its rollouts; `missing`
// positions are per part, so they are shifted by the rollouts of the parts before.
func Reassemble(parts []*pb.AggregateMetricsResponse) (*pb.AggregateMetricsResponse, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("AggregateMetrics answered no part")
	}
	if !parts[len(parts)-1].Last {
		return nil, fmt.Errorf("AggregateMetrics answer ended before its last part")
	}
	whole := proto.Clone(parts[0]).(*pb.AggregateMetricsResponse)
	g := whole.GetMetrics().GetGroupLevelMetrics()
	if g == nil {
		return whole, nil
	}
	for _, part := range parts[1:] {
		appendGroups(g, part.GetMetrics().GetGroupLevelMetrics())
	}
	whole.Last = true
	return whole, nil
}

func appendGroups(g, more *pb.GroupLevelMetrics) {
	if more == nil {
		return
	}
	before, adding := len(g.TaskIndex), len(more.TaskIndex)
	g.TaskIndex = append(g.TaskIndex, more.TaskIndex...)
	if g.Stats == nil {
		g.Stats = map[string]*pb.DoubleColumn{}
	}
	for key := range more.Stats {
		if _, ok := g.Stats[key]; !ok {
			g.Stats[key] = &pb.DoubleColumn{Values: nans(before)}
		}
	}
	for key, column := range g.Stats {
		if added, ok := more.Stats[key]; ok {
			column.Values = append(column.Values, added.Values...)
		} else {
			column.Values = append(column.Values, nans(adding)...)
		}
	}
	g.NumRollouts = append(g.NumRollouts, more.NumRollouts...)
	g.ExpectedNumRollouts = append(g.ExpectedNumRollouts, more.ExpectedNumRollouts...)
	g.MissingNumRollouts = append(g.MissingNumRollouts, more.MissingNumRollouts...)
	g.RewardProfileCompletionPct = append(g.RewardProfileCompletionPct, more.RewardProfileCompletionPct...)
	g.SampleJson = append(g.SampleJson, more.SampleJson...)
	g.CustomJson = append(g.CustomJson, more.CustomJson...)
	if more.RolloutInfos != nil {
		if g.RolloutInfos == nil {
			g.RolloutInfos = &pb.RolloutInfos{}
		}
		appendInfos(g.RolloutInfos, more.RolloutInfos)
	}
}

func appendInfos(infos, more *pb.RolloutInfos) {
	before, adding := len(infos.TaskIndex), len(more.TaskIndex)
	infos.TaskIndex = append(infos.TaskIndex, more.TaskIndex...)
	infos.RolloutIndex = append(infos.RolloutIndex, more.RolloutIndex...)
	if infos.Values == nil {
		infos.Values = map[string]*pb.NumericColumn{}
	}
	for key, added := range more.Values {
		if _, ok := infos.Values[key]; !ok {
			infos.Values[key] = &pb.NumericColumn{Values: make([]float64, before), Missing: positions(0, before), Kind: added.Kind}
		}
	}
	for key, column := range infos.Values {
		added, ok := more.Values[key]
		if !ok {
			column.Values = append(column.Values, make([]float64, adding)...)
			column.Missing = append(column.Missing, positions(before, adding)...)
			continue
		}
		column.Values = append(column.Values, added.Values...)
		for _, at := range added.Missing {
			column.Missing = append(column.Missing, at+uint32(before))
		}
	}
	if infos.Shown == nil {
		infos.Shown = map[string]*pb.ShownColumn{}
	}
	for key, column := range infos.Shown {
		if _, ok := more.Shown[key]; !ok { // this part's rollouts show their values column
			appendShownFromValues(column, more.Values[key], before, adding)
		}
	}
	for key, added := range more.Shown {
		column, ok := infos.Shown[key]
		if !ok {
			column = &pb.ShownColumn{Values: make([]float64, before), Missing: positions(0, before)}
			infos.Shown[key] = column
		}
		column.Values = append(column.Values, added.Values...)
		for _, at := range added.Missing {
			column.Missing = append(column.Missing, at+uint32(before))
		}
		for _, at := range added.Ints {
			column.Ints = append(column.Ints, at+uint32(before))
		}
		for at, text := range added.Json {
			if column.Json == nil {
				column.Json = map[uint32]string{}
			}
			column.Json[at+uint32(before)] = text
		}
	}
}

// appendShownFromValues shows a part's values column (nil: the key absent) as its shown one.
func appendShownFromValues(column *pb.ShownColumn, values *pb.NumericColumn, before, adding int) {
	if values == nil {
		column.Values = append(column.Values, make([]float64, adding)...)
		column.Missing = append(column.Missing, positions(before, adding)...)
		return
	}
	column.Values = append(column.Values, values.Values...)
	missing := map[uint32]bool{}
	for _, at := range values.Missing {
		missing[at] = true
		column.Missing = append(column.Missing, at+uint32(before))
	}
	if values.Kind == pb.ValueKind_VALUE_KIND_INT {
		for at := 0; at < adding; at++ {
			if !missing[uint32(at)] {
				column.Ints = append(column.Ints, uint32(before+at))
			}
		}
	}
}

func nans(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}

func positions(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}
