// Package gymmetrics is a small hand-written layer over the generated gymmetricsv1 client:
// stream a JSONL file of rollouts through VerifyStream, aggregate each agent's verified rows
// through AggregateMetrics (its parts reassembled), and submit a durable job and wait for its
// result. docs/grpc.md is the contract's guide; this package follows it.
package gymmetrics

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// Rollout is one line of a rollouts file: the verify request as the line holds it.
type Rollout struct {
	Agent        string
	TaskIndex    int64
	RolloutIndex int64
	// Line is the 1-based line number in the file (for error messages).
	Line int
	// Row is the line's JSON object, as text: the verify request's body.
	Row json.RawMessage
}

// ReadRollouts reads a JSONL file of rollouts to verify, indexed as `gym-metrics collect`
// (and NeMo Gym's collection) index them, line by line in file order: a line keeps its
// `_ng_task_index`; a line without one gets the index of the first identical line before it
// (compared as text), or else the next new index (the number of distinct such lines so far).
// Rollout indices count per task index over every agent, in file order (a given
// `_ng_rollout_index` is replaced). Each line is a JSON object with `agent_ref.name`; a line
// that is not is an error naming its line.
func ReadRollouts(path string) ([]Rollout, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<30)
	var rollouts []Rollout
	line, next := 0, int64(0)
	taskOf := map[string]int64{}    // a line without a task index -> the index of its first copy
	rolloutsOf := map[int64]int64{} // task index -> rollouts so far
	for scanner.Scan() {
		line++
		text := scanner.Bytes()
		if len(text) == 0 {
			continue
		}
		var head struct {
			AgentRef *struct {
				Name string `json:"name"`
			} `json:"agent_ref"`
			TaskIndex *int64 `json:"_ng_task_index"`
		}
		if err := json.Unmarshal(text, &head); err != nil {
			return nil, fmt.Errorf("%s:%d: not a JSON object: %v", path, line, err)
		}
		if head.AgentRef == nil || head.AgentRef.Name == "" {
			return nil, fmt.Errorf("%s:%d: agent_ref.name is missing", path, line)
		}
		r := Rollout{Agent: head.AgentRef.Name, Line: line, Row: append(json.RawMessage(nil), text...)}
		if head.TaskIndex != nil {
			r.TaskIndex = *head.TaskIndex
		} else if index, seen := taskOf[string(text)]; seen {
			r.TaskIndex = index
		} else {
			r.TaskIndex, taskOf[string(text)] = next, next
			next++
		}
		r.RolloutIndex = rolloutsOf[r.TaskIndex]
		rolloutsOf[r.TaskIndex]++
		rollouts = append(rollouts, r)
	}
	return rollouts, scanner.Err()
}

// Agents are the agents of rollouts in order of first appearance.
func Agents(rollouts []Rollout) []string {
	seen := map[string]bool{}
	var agents []string
	for _, r := range rollouts {
		if !seen[r.Agent] {
			seen[r.Agent] = true
			agents = append(agents, r.Agent)
		}
	}
	return agents
}

// carriedKeys are the request's keys the written row keeps, whatever the response holds.
var carriedKeys = []string{"_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source", "skills_ref", "_ng_attempt_index", "_ng_rollout_id"}

// requestKeys are taken from the request when the verify response lacks them.
var requestKeys = []string{"responses_create_params", "response"}

// WrittenRow is the row AggregateMetrics reads for a verified rollout, as `gym-metrics
// collect` writes it (NeMo Gym's rule): the verify response; the request's
// `responses_create_params` and `response` where the response has none (token statistics are
// read from `response.usage`); and the request's indices, `agent_ref` and a few other keys.
// Other input columns (a dataset's `id`) are not written, so they are not aggregated. A
// rollout that failed verification keeps its request row. Either way the row holds the
// rollout's assigned indices.
func WrittenRow(r Rollout, responseJSON string) (json.RawMessage, error) {
	var req, row map[string]json.RawMessage
	if err := json.Unmarshal(r.Row, &req); err != nil {
		return nil, err
	}
	if responseJSON == "" {
		row = map[string]json.RawMessage{}
		for key, value := range req {
			row[key] = value
		}
	} else if err := json.Unmarshal([]byte(responseJSON), &row); err != nil {
		return nil, err
	}
	for _, key := range requestKeys {
		if _, has := row[key]; !has {
			if value, ok := req[key]; ok {
				row[key] = value
			}
		}
	}
	for _, key := range carriedKeys {
		if value, ok := req[key]; ok {
			row[key] = value
		}
	}
	row["_ng_task_index"] = json.RawMessage(fmt.Sprint(r.TaskIndex))
	row["_ng_rollout_index"] = json.RawMessage(fmt.Sprint(r.RolloutIndex))
	return json.Marshal(row)
}
