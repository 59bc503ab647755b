package gymmetrics

import (
	"math"
	"os"
	"reflect"
	"testing"

	pb "github.com/gym-metrics/gym-metrics/clients/go/gymmetricsv1"
)

func part(tasks []int64, stats map[string][]float64, infos *pb.RolloutInfos, last bool) *pb.AggregateMetricsResponse {
	g := &pb.GroupLevelMetrics{TaskIndex: tasks, Stats: map[string]*pb.DoubleColumn{}, RolloutInfos: infos}
	for key, values := range stats {
		g.Stats[key] = &pb.DoubleColumn{Values: values}
	}
	for range tasks {
		g.NumRollouts = append(g.NumRollouts, 2)
	}
	return &pb.AggregateMetricsResponse{Metrics: &pb.Metrics{GroupLevelMetrics: g}, Last: last}
}

func TestReassembleFillsAbsentKeysAndShiftsPositions(t *testing.T) {
	first := part([]int64{0, 1}, map[string][]float64{"mean/reward": {1, 0.5}}, &pb.RolloutInfos{
		TaskIndex: []int64{0, 0, 1, 1}, RolloutIndex: []int64{0, 1, 0, 1},
		Values: map[string]*pb.NumericColumn{"reward": {Values: []float64{1, 1, 0, 1}, Missing: []uint32{2}}},
	}, false)
	second := part([]int64{2}, map[string][]float64{"mean/steps": {3}}, &pb.RolloutInfos{
		TaskIndex: []int64{2, 2}, RolloutIndex: []int64{0, 1},
		Values: map[string]*pb.NumericColumn{"reward": {Values: []float64{0, 1}, Missing: []uint32{0}}, "steps": {Values: []float64{3, 3}}},
	}, true)
	whole, err := Reassemble([]*pb.AggregateMetricsResponse{first, second})
	if err != nil {
		t.Fatal(err)
	}
	g := whole.Metrics.GroupLevelMetrics
	if !reflect.DeepEqual(g.TaskIndex, []int64{0, 1, 2}) || len(g.NumRollouts) != 3 {
		t.Fatalf("tasks %v, num_rollouts %v", g.TaskIndex, g.NumRollouts)
	}
	reward, steps := g.Stats["mean/reward"].Values, g.Stats["mean/steps"].Values
	if reward[0] != 1 || reward[1] != 0.5 || !math.IsNaN(reward[2]) {
		t.Fatalf("mean/reward %v: the third task has none", reward)
	}
	if !math.IsNaN(steps[0]) || !math.IsNaN(steps[1]) || steps[2] != 3 {
		t.Fatalf("mean/steps %v: only the third task has it", steps)
	}
	infos := g.RolloutInfos
	if got := infos.Values["reward"].Missing; !reflect.DeepEqual(got, []uint32{2, 4}) {
		t.Fatalf("reward missing at %v, want [2 4] (the second part's 0 shifted by 4 rollouts)", got)
	}
	if got := infos.Values["steps"].Missing; !reflect.DeepEqual(got, []uint32{0, 1, 2, 3}) {
		t.Fatalf("steps missing at %v, want the first part's 4 rollouts", got)
	}
	if !whole.Last {
		t.Fatal("the whole answer is its last part")
	}
}

func TestReassembleRefusesAnAnswerWithoutItsLastPart(t *testing.T) {
	if _, err := Reassemble([]*pb.AggregateMetricsResponse{part([]int64{0}, nil, nil, false)}); err == nil {
		t.Fatal("an answer that ended early must be an error")
	}
	if _, err := Reassemble(nil); err == nil {
		t.Fatal("no part must be an error")
	}
}

func TestWrittenRowKeepsWhatCollectWrites(t *testing.T) {
	request := []byte(`{"agent_ref":{"name":"a"},"_ng_task_index":3,"id":"x-17","expected_answer":"4","response":{"usage":{"output_tokens":9}}}`)
	row, err := WrittenRow(Rollout{Row: request, TaskIndex: 3, RolloutIndex: 2}, `{"reward":1,"expected_answer":"4","extracted_answer":"4"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_ng_rollout_index":2,"_ng_task_index":3,"agent_ref":{"name":"a"},"expected_answer":"4","extracted_answer":"4","response":{"usage":{"output_tokens":9}},"reward":1}`
	if string(row) != want {
		t.Fatalf("got %s\nwant %s (a dataset column such as id is not written)", row, want)
	}
}

func TestReadRolloutsIndexesAsCollectDoes(t *testing.T) {
	path := t.TempDir() + "/in.jsonl"
	lines := `{"agent_ref":{"name":"a"},"q":"A"}
{"agent_ref":{"name":"a"},"q":"B","_ng_task_index":0}
{"agent_ref":{"name":"b"},"q":"C","_ng_rollout_index":7}
{"agent_ref":{"name":"a"},"q":"A"}
`
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	rollouts, err := ReadRollouts(path)
	if err != nil {
		t.Fatal(err)
	}
	var keys [][2]int64
	for _, r := range rollouts {
		keys = append(keys, [2]int64{r.TaskIndex, r.RolloutIndex})
	}
	if want := [][2]int64{{0, 0}, {0, 1}, {1, 0}, {0, 2}}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %v, want %v (docs/pipelines.md: A, B(_ng_task_index 0), C, A)", keys, want)
	}
	if _, err := ReadRollouts(path + ".missing"); err == nil {
		t.Fatal("a missing file must be an error")
	}
}
