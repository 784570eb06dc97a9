package cluster_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileFloodIsBoundedByQuotas is issue 20 item 5, as an ordinary
// user makes it: profile after profile of new model names from a shell on
// the node. The core's cap on models per user (2 here) stops it: the third
// model is refused for good, the CLI says which cap, slurmctld's log says
// who and why, and the agent does not retry it. Points shorter than the
// node's min_point_seconds are refused before anything runs.
func TestProfileFloodIsBoundedByQuotas(t *testing.T) {
	e := startAgentClusterWith(t, "  max_models_per_user: 2\n")
	pid, err := e.c.ControllerPID()
	if err != nil {
		t.Fatal(err)
	}
	synth := filepath.Join(e.bin, "lachesis-synth")
	profileAs := func(model, pointSeconds string) (string, error) {
		return e.profilerCLI(testUser, "profile", "--agent-socket", e.agentSock, "--model", model,
			"--point-seconds", pointSeconds, "--max-cpus", "1", "--", "/bin/sh", "-c", "exec "+synth+" -knee 1 -seconds 0 -data-mb 4")
	}
	out, err := profileAs("flood-fast", "0.01")
	if err == nil || !strings.Contains(out, "min_point_seconds") {
		t.Fatalf("a 10 ms point was not refused: %v\n%s", err, out)
	}
	for i := 0; i < 2; i++ {
		if out, err := profileAs(fmt.Sprint("flood-", i), "2"); err != nil || !strings.Contains(out, "delivered to the controller") {
			t.Fatalf("profile %d: %v\n%s", i, err, out)
		}
	}
	out, err = profileAs("flood-2", "2")
	if err == nil || !strings.Contains(out, "refused") || !strings.Contains(out, "agent.max_models_per_user") {
		t.Fatalf("the user's third model was not refused naming the cap: %v\n%s", err, out)
	}
	if n := e.profileCount("flood-2"); n != 0 {
		t.Fatalf("%d rows of the refused model", n)
	}
	if !e.logMatches(`agent report rejected peer=\S+ reason=profile_quota err=.*agent\.max_models_per_user.* user=` + testUser + ` node=lnode1 model=flood-2`) {
		t.Fatalf("slurmctld's log does not say what was refused and why:\n%s", tail(e.c.ControllerLog(), 20))
	}
	// The agent keeps the refusal and does not send it again.
	status, err := e.profilerCLI("", "status", "--agent-socket", e.agentSock)
	if err != nil || !strings.Contains(status, "0 waiting in the spool") {
		t.Fatalf("agent status: %v\n%s", err, status)
	}
	if !strings.Contains(e.agentLogText(), "profile refused by the controller for good; not sent again") {
		t.Fatalf("the agent does not log the refusal:\n%s", e.agentLogText())
	}
	// A model the user already has may still be profiled again.
	if out, err := profileAs("flood-0", "2"); err != nil || !strings.Contains(out, "delivered to the controller") {
		t.Fatalf("a known model: %v\n%s", err, out)
	}
	e.controllerAlive(pid)
}
