package slurmcluster

import "testing"

func TestOverrideConf(t *testing.T) {
	frag := "PriorityType=priority/tiresias\nPreemptType=preempt/tiresias\n# comment\njobsubmitplugins=synergy"
	got := OverrideConf(frag, "PreemptType=preempt/none", "JobSubmitPlugins=")
	want := "PriorityType=priority/tiresias\n# comment\nPreemptType=preempt/none\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
