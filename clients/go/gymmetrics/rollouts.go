// Package gymmetrics is a small hand-written layer over the generated gymmetricsv1 client:
// stream a JSONL file of rollouts through VerifyStream, aggregate each agent's verified rows
// through AggregateMetrics (its parts reassembled), and submit a durable job and wait for its
// result. docs/grpc.md is the contract's guide; this package follows it.
package gymmetrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Rollout is one line of a rollouts file: the verify request as the line holds it.
type Rollout struct {
	Agent        string
	TaskIndex    int64
	RolloutIndex int64
	// Line is the 1-based line number in the file (for error messages).
	Line int
	// Row is the line's JSON object, as text: the verify request's body (a CRLF ending dropped).
	Row json.RawMessage
	// Finished: the line already holds a `reward` (a finished rollout, as `gym-metrics collect`
	// reads it): it is not verified again, and its row is aggregated as it is.
	Finished bool
}

// MaxIndex is the largest task or rollout index (as gym-metrics: 64-bit, less one).
const MaxIndex = math.MaxInt64 - 1

// ReadRollouts reads a JSONL file of rollouts, indexed as `gym-metrics collect` (and NeMo
// Gym's collection) index them, line by line in file order (docs/pipelines.md):
//
//   - A line to verify keeps its `_ng_task_index`; a line without one gets the index of the
//     first identical line before it, or else the next new index (the number of distinct such
//     lines so far). Lines are compared as text with their ending: a CRLF ending counts as a
//     newline, and a last line without a final newline differs from the same line earlier.
//   - Rollout indices count per task index over every agent, in file order (a given
//     `_ng_rollout_index` is replaced), passing over those of finished rollouts of the task.
//   - A line that already has a `reward` (not null) is a finished rollout: it is not verified
//     again. With both indices (`_ng_task_index` or `task_index`, `_ng_rollout_index` or
//     `rollout_index`) it keeps them; with fewer it is indexed like a line to verify (its task
//     index read under either name). One finished key on two lines is an error naming both.
//
// An index must be an integer from 0 to MaxIndex (2.0 is 2). Each line is a JSON object with
// `agent_ref.name`; a line that is not, or has a wrong index, is an error naming its line
// (`path:line: field: why`).
func ReadRollouts(path string) ([]Rollout, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	type parsed struct {
		rollout     Rollout
		identity    string // the line as NeMo Gym compares lines (its ending included)
		task        *int64 // its own task index, when it has one
		fixed       bool   // a finished rollout with both indices
		fixedRollID int64
	}
	var lines []parsed
	for number, start := 1, 0; start < len(data); number++ {
		end := bytes.IndexByte(data[start:], '\n')
		terminated := end >= 0
		if !terminated {
			end = len(data) - start
		}
		text := bytes.TrimSuffix(data[start:start+end], []byte("\r"))
		start += end + 1
		if len(text) == 0 {
			continue
		}
		at := fmt.Sprintf("%s:%d", path, number)
		var row map[string]json.RawMessage
		decoder := json.NewDecoder(bytes.NewReader(text))
		decoder.UseNumber()
		if err := decoder.Decode(&row); err != nil || row == nil {
			why := "null"
			if err != nil {
				why = err.Error()
			}
			return nil, fmt.Errorf("%s: not a JSON object: %s", at, why)
		}
		if decoder.More() {
			return nil, fmt.Errorf("%s: not a JSON object: text after the object", at)
		}
		var ref struct {
			Name *string `json:"name"`
		}
		if raw, ok := row["agent_ref"]; !ok || json.Unmarshal(raw, &ref) != nil || ref.Name == nil || *ref.Name == "" {
			return nil, fmt.Errorf("%s: agent_ref.name is missing", at)
		}
		p := parsed{rollout: Rollout{Agent: *ref.Name, Line: number, Row: append(json.RawMessage(nil), text...)}, identity: string(text)}
		if terminated {
			p.identity += "\n"
		}
		p.rollout.Finished = given(row, "reward")
		taskKeys, rolloutKeys := []string{"_ng_task_index"}, []string{"_ng_rollout_index", "rollout_index"}
		if p.rollout.Finished {
			taskKeys = []string{"_ng_task_index", "task_index"}
		}
		task, err := indexOf(row, taskKeys)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", at, err)
		}
		p.task = task
		if p.rollout.Finished && task != nil {
			r, err := indexOf(row, rolloutKeys)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", at, err)
			}
			if r != nil {
				p.fixed, p.fixedRollID = true, *r
			}
		}
		lines = append(lines, p)
	}

	// Finished rollouts with both indices first: their keys are fixed, counted ones pass over them.
	type key struct {
		agent         string
		task, rollout int64
	}
	firstAt := map[key]int{}
	taken := map[int64]map[int64]bool{} // task -> rollout indices fixed keys hold
	for _, p := range lines {
		if !p.fixed {
			continue
		}
		k := key{p.rollout.Agent, *p.task, p.fixedRollID}
		if first, seen := firstAt[k]; seen {
			return nil, fmt.Errorf("%s:%d: rollouts given twice: (%q, %d, %d) again (first at line %d): two lines hold this rollout",
				path, p.rollout.Line, k.agent, k.task, k.rollout, first)
		}
		firstAt[k] = p.rollout.Line
		if taken[k.task] == nil {
			taken[k.task] = map[int64]bool{}
		}
		taken[k.task][k.rollout] = true
	}
	taskOf := map[string]int64{} // a line without a task index -> the index of its first copy
	nextOf := map[int64]int64{}  // task index -> the next rollout index to try
	rollouts := make([]Rollout, 0, len(lines))
	for _, p := range lines {
		r := p.rollout
		switch {
		case p.fixed:
			r.TaskIndex, r.RolloutIndex = *p.task, p.fixedRollID
		default:
			if p.task != nil {
				r.TaskIndex = *p.task
			} else if index, seen := taskOf[p.identity]; seen {
				r.TaskIndex = index
			} else {
				r.TaskIndex = int64(len(taskOf))
				taskOf[p.identity] = r.TaskIndex
			}
			next := nextOf[r.TaskIndex]
			for taken[r.TaskIndex][next] {
				next++
			}
			r.RolloutIndex, nextOf[r.TaskIndex] = next, next+1
		}
		rollouts = append(rollouts, r)
	}
	return rollouts, nil
}

// given: the row has key with a value other than null.
func given(row map[string]json.RawMessage, key string) bool {
	raw, ok := row[key]
	return ok && string(raw) != "null"
}

// indexOf is the row's index under the first of keys it has (null counts as none), nil when
// it has none; an error naming the key when the value is not an integer from 0 to MaxIndex.
func indexOf(row map[string]json.RawMessage, keys []string) (*int64, error) {
	for _, key := range keys {
		if !given(row, key) {
			continue
		}
		raw := strings.TrimSpace(string(row[key]))
		var number json.Number
		if json.Unmarshal([]byte(raw), &number) != nil || !isJSONNumber(raw) {
			return nil, fmt.Errorf("%s: must be an integer, got %s", key, raw)
		}
		if i, err := strconv.ParseInt(raw, 10, 64); err == nil {
			if i < 0 {
				return nil, fmt.Errorf("%s: must be >= 0, got %d", key, i)
			}
			if i > MaxIndex {
				return nil, fmt.Errorf("%s: must be at most %d (indices are 64-bit), got %s", key, int64(MaxIndex), raw)
			}
			return &i, nil
		}
		f, err := strconv.ParseFloat(raw, 64)
		integral := strings.IndexAny(raw, ".eE") < 0 // an integer literal that did not fit in 64 bits
		if !integral && (err != nil || f != math.Trunc(f)) {
			return nil, fmt.Errorf("%s: must be an integer, got %s", key, raw)
		}
		if f < 0 || (integral && strings.HasPrefix(raw, "-")) {
			return nil, fmt.Errorf("%s: must be >= 0, got %s", key, raw)
		}
		if integral || f > MaxIndex {
			return nil, fmt.Errorf("%s: must be at most %d (indices are 64-bit), got %s", key, int64(MaxIndex), raw)
		}
		i := int64(f)
		return &i, nil
	}
	return nil, nil
}

// isJSONNumber: raw is a JSON number (not a string, bool, object or array).
func isJSONNumber(raw string) bool {
	return raw != "" && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
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

// WrittenRow is the row AggregateMetrics reads for a rollout, as `gym-metrics collect` writes
// it (NeMo Gym's rule): for a verified rollout, the verify response; the request's
// `responses_create_params` and `response` where the response has none (token statistics are
// read from `response.usage`); and the request's indices, `agent_ref` and a few other keys.
// Other input columns (a dataset's `id`) are not written, so they are not aggregated. A
// rollout that failed verification keeps its request row, and a finished one (Finished: not
// verified again) its whole row. Either way the row holds the rollout's assigned indices.
// Values keep their text (1.0 stays 1.0: the server types it a float).
func WrittenRow(r Rollout, responseJSON string) (json.RawMessage, error) {
	var req, row map[string]json.RawMessage
	if err := json.Unmarshal(r.Row, &req); err != nil {
		return nil, err
	}
	if responseJSON == "" || r.Finished {
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
