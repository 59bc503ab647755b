// Command gym-metrics-go is the Go client's example: verify and aggregate a rollouts file on a
// gym-metrics server, or run a durable job on a job server, and print what came back as JSON.
//
//	gym-metrics-go verify -server 127.0.0.1:50051 -input rollouts.jsonl
//	gym-metrics-go job -server 127.0.0.1:50052 -spec spec.json
//
// -timeout bounds the whole run (5m by default); -auth-token-env VAR sends the token in $VAR as
// `authorization: Bearer ...`; -tls-ca FILE connects with TLS, trusting that PEM root.
//
// `verify` prints {"rewards": [{"agent", "task_index", "rollout_index", "reward"}, ...], "agents": {NAME: {"agent_metrics", "key_metrics",
// "group_level_metrics"}}}; `job` prints {"state", "aggregate_scores", "row_scores"}. A spec is
// JobSpec in protobuf's JSON form ({"scorer": ..., "dataset": {"rows": {"rowsJson": [...]}}}).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gym-metrics/gym-metrics/clients/go/gymmetrics"
	pb "github.com/gym-metrics/gym-metrics/clients/go/gymmetricsv1"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: gym-metrics-go verify|job [flags]"))
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	server := flags.String("server", "127.0.0.1:50051", "HOST:PORT of the server")
	input := flags.String("input", "", "verify: the rollouts JSONL file")
	specPath := flags.String("spec", "", "job: the JobSpec as JSON")
	timeout := flags.Duration("timeout", 5*time.Minute, "give up after this long")
	tokenEnv := flags.String("auth-token-env", "", "send `authorization: Bearer $VAR` (the token in this environment variable)")
	tlsCA := flags.String("tls-ca", "", "connect with TLS, trusting this PEM root certificate")
	_ = flags.Parse(os.Args[2:])

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	token, err := gymmetrics.TokenFromEnv(*tokenEnv)
	if err != nil {
		fail(err)
	}
	conn, err := gymmetrics.Dial(*server, gymmetrics.DialOptions{Token: token, TLSCA: *tlsCA})
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	var out interface{}
	switch os.Args[1] {
	case "verify":
		out, err = verify(ctx, pb.NewResourcesServiceClient(conn), *input)
	case "job":
		out, err = job(ctx, pb.NewJobServiceClient(conn), *specPath)
	default:
		err = fmt.Errorf("unknown command %q (verify or job)", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	encoded, err := json.Marshal(out)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(encoded))
}

func verify(ctx context.Context, client pb.ResourcesServiceClient, input string) (interface{}, error) {
	rollouts, err := gymmetrics.ReadRollouts(input)
	if err != nil {
		return nil, err
	}
	verified, err := gymmetrics.VerifyAll(ctx, client, rollouts, 0)
	if err != nil {
		return nil, err
	}
	rewards := make([]map[string]interface{}, len(verified))
	for i, v := range verified {
		reward := interface{}(v.Reward)
		if v.Finished { // the row's own value: a text reward stays text, as collect writes it
			reward = gymmetrics.RowReward(v.Row)
		}
		rewards[i] = map[string]interface{}{"agent": v.Agent, "task_index": v.TaskIndex, "rollout_index": v.RolloutIndex, "reward": reward}
	}
	agents := map[string]interface{}{}
	for _, agent := range gymmetrics.Agents(rollouts) {
		answer, err := gymmetrics.Aggregate(ctx, client, agent, verified, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %v", agent, err)
		}
		m := answer.Metrics
		g := m.GroupLevelMetrics
		stats := map[string][]interface{}{}
		for key, column := range g.Stats {
			stats[key] = finite(column.Values)
		}
		agents[agent] = map[string]interface{}{
			"agent_metrics": json.RawMessage(m.AgentMetricsJson),
			"key_metrics":   json.RawMessage(m.KeyMetricsJson),
			"group_level_metrics": map[string]interface{}{
				"task_index": g.TaskIndex, "num_rollouts": g.NumRollouts, "stats": stats,
			},
		}
	}
	return map[string]interface{}{"rewards": rewards, "agents": agents}, nil
}

func job(ctx context.Context, client pb.JobServiceClient, specPath string) (interface{}, error) {
	text, err := os.ReadFile(specPath)
	if err != nil {
		return nil, err
	}
	spec := &pb.JobSpec{}
	if err := protojson.Unmarshal(text, spec); err != nil {
		return nil, fmt.Errorf("%s: %v", specPath, err)
	}
	result, err := gymmetrics.SubmitAndWait(ctx, client, spec, nil)
	if err != nil {
		if bad := gymmetrics.FieldViolations(err); len(bad) > 0 {
			return nil, fmt.Errorf("%v (fields: %v)", err, bad)
		}
		return nil, err
	}
	return map[string]interface{}{
		"state": result.Job.State.String(), "aggregate_scores": result.AggregateScores, "row_scores": result.RowScores,
	}, nil
}

// finite is JSON's view of a column: NaN (no such stat for a task) as null.
func finite(values []float64) []interface{} {
	out := make([]interface{}, len(values))
	for i, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out[i] = v
		}
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}
