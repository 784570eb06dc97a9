package cluster_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// `scontrol reconfigure` with the node-agent listener and /metrics on:
// Slurm 22.05 re-reads lachesis.yaml in the running slurmctld; from 24.05 a
// new slurmctld is started beside the running one, which keeps both ports
// until the new one is up, and the new core must neither fail over them nor
// lose them. Either way the new config is in force, an agent's profile
// still reaches the controller and /metrics answers. Before the 24.11 port
// the new slurmctld's core refused the taken metrics address, so every
// reconfigure failed ("Resuming operation, reconfigure failed") and the old
// config stayed.
func TestReconfigureKeepsTheAgentListenerAndMetrics(t *testing.T) {
	metrics := freeTCPAddr(t)
	e := startAgentClusterFull(t, "", "metrics:\n  listen: "+metrics+"\n", "", nil)
	if out := e.profile("before-reconfigure"); !strings.Contains(out, "delivered to the controller") {
		t.Fatalf("profile before the reconfigure:\n%s", out)
	}
	yaml := tiresiasYAML(e.dir, "agent:\n  listen: "+e.listen+"\nmetrics:\n  listen: "+metrics+"\ntiresias:\n  thresholds: [77, 100000]\n")
	if err := e.c.WriteLachesisYAML(yaml); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "the reconfigured thresholds in force", func() (bool, string) {
		return e.logMatches(`queue thresholds in force when=reload thresholds_gpu_s=\[77,100000\]`), ""
	})
	if e.logMatches(`reconfigure failed`) {
		t.Fatal("slurmctld says the reconfigure failed")
	}
	if !e.c.Ping() {
		t.Fatal("slurmctld does not answer after the reconfigure")
	}
	// The agent delivers to the (new) controller: its delivery retries
	// until the listener is there.
	e.profile("after-reconfigure")
	e.eventually(60*time.Second, "the profile made after the reconfigure in the controller's database", func() (bool, string) {
		return e.profileCount("after-reconfigure") == 1, ""
	})
	e.eventually(30*time.Second, "/metrics to answer after the reconfigure", func() (bool, string) {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), "lachesis_pass_duration_seconds"), resp.Status
	})
	id := e.submit("-J", "after", "--gpus=1", "--wrap", "sleep 1")
	e.waitState(id, "COMPLETED", 60*time.Second)
}
