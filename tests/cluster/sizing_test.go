package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/deliver"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// An agent (the real delivery client, the cluster's munged, the core's
// listener inside slurmctld) reports a best case of 1e-9 GB per GPU: the
// controller refuses it, says why, and a job of that model gets the
// proportional share instead of 1 MB per GPU.
func TestImplausibleProfileIsRefusedAndItsModelGetsTheShare(t *testing.T) {
	listen := freeTCPAddr(t)
	e := startShapedCluster(t, synergyShape, "agent:\n  listen: "+listen+"\n", synergyConf...)
	socket := mungeSocketOf(t, e.c.Conf)
	c := &deliver.Client{Addr: listen, Signer: &munge.Client{Socket: socket}, Timeout: 20 * time.Second}
	rec := profile.Record{ID: fmt.Sprintf("tiny-%d", time.Now().UnixNano()), Model: "tiny", Node: "lnode1", GPUs: 1,
		Finished: time.Now(), Best: sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 1e-9}}
	var ack wire.Ack
	var err error
	e.eventually(30*time.Second, "an answer from the core's agent listener", func() (bool, string) {
		ack, err = c.Send(context.Background(), wire.TypeProfile, &wire.ProfileReport{Record: rec})
		return !errors.Is(err, deliver.ErrUnreachable), fmt.Sprint(err)
	})
	if !errors.Is(err, deliver.ErrRefused) || ack.OK || ack.Error != "implausible_profile" {
		t.Fatalf("ack %+v, %v; want a refusal, implausible_profile", ack, err)
	}
	if !e.logMatches(`agent report rejected .*reason=implausible_profile .*implausible demand: 1e-09 GB per GPU`) {
		t.Fatalf("slurmctld's log does not give the reason:\n%s", e.c.ControllerLog())
	}
	_, f := e.runAndRead("-J", "tiny", "--gpus=1")
	if f["CpusPerTres"] != gresTRES("gpu:1") || f["MemPerTres"] != gresTRES("gpu:2000") {
		t.Fatalf("CpusPerTres=%s MemPerTres=%s; want the share, 1 CPU and 2000 MB per GPU", f["CpusPerTres"], f["MemPerTres"])
	}
	if ac := f["AdminComment"]; !strings.Contains(ac, "model=tiny proportional share (no profile yet)") {
		t.Fatalf("AdminComment %q; want the share for an unprofiled model", ac)
	}
}

// Nodes of 2 GPUs, a job of 3 GPUs submitted without -p: it is sized from
// the default partition's nodes (Slurm spreads it over two), and the admin
// comment names that partition. A job given a list of partitions is sized
// from their nodes, and the comment names the list.
func TestJobWithoutPartitionIsSizedFromTheDefaultPartition(t *testing.T) {
	conf := append([]string{"PartitionName=half Nodes=lnode2 MaxTime=INFINITE State=UP"}, synergyConf...)
	e := startShapedCluster(t, shape{Nodes: 2, GPUs: 2, CPUs: 2, MemMB: 4000}, "", conf...)
	id := e.submit("-J", "wide", "--gpus=3", "--wrap", "sleep 1")
	d, err := e.c.ShowJob(id)
	if err != nil {
		t.Fatal(err)
	}
	f := d.Fields
	if f["CpusPerTres"] != gresTRES("gpu:1") || f["MemPerTres"] != gresTRES("gpu:2000") {
		t.Fatalf("CpusPerTres=%s MemPerTres=%s AdminComment=%q; want the share of a 2-GPU node", f["CpusPerTres"], f["MemPerTres"], f["AdminComment"])
	}
	if ac := f["AdminComment"]; !strings.Contains(ac, "spread over nodes of 2 GPUs") || !strings.Contains(ac, "per GPU on partition gpu") {
		t.Fatalf("AdminComment %q; want the spread and the default partition named", ac)
	}

	id = e.submit("-J", "listed", "-p", "half,gpu", "--gpus=1", "--wrap", "sleep 1")
	if d, err = e.c.ShowJob(id); err != nil {
		t.Fatal(err)
	}
	if f := d.Fields; f["CpusPerTres"] != gresTRES("gpu:1") || !strings.Contains(f["AdminComment"], "on partition half,gpu") {
		t.Fatalf("CpusPerTres=%s AdminComment=%q; want the share and the list named", f["CpusPerTres"], f["AdminComment"])
	}
}
