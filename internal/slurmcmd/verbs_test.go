package slurmcmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"
)

func TestParseOwner(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		uid       uint32
		running   bool
		bad       bool
	}{
		{"a uid", "1001\n", 1001, true, false},
		{"nothing: not running here", "", 0, false, false},
		{"blank lines: not running here", " \n\n", 0, false, false},
		{"two answers refused", "1001\n1002\n", 0, false, true},
		{"a name refused", "alice\n", 0, false, true},
		{"a negative refused", "-1\n", 0, false, true},
		{"over 32 bits refused", "4294967296\n", 0, false, true},
		{"control characters refused", "10\x1b[2J01\n", 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid, running, err := parseOwner(tc.out, 5)
			if (err != nil) != tc.bad || uid != tc.uid || running != tc.running {
				t.Fatalf("got %d, %v, %v", uid, running, err)
			}
		})
	}
	// A huge malformed answer is quoted in the error, bounded.
	_, _, err := parseOwner(strings.Repeat("x", 1<<20), 5)
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("error of %d bytes", len(err.Error()))
	}
}

func TestParseNodeGres(t *testing.T) {
	for out, want := range map[string]string{
		"NodeName=n1 Arch=x86_64 Gres=gpu:a100:4(S:0-1),shard:8 NodeAddr=n1\n": "gpu:a100:4(S:0-1),shard:8",
		"NodeName=n1 Gres=(null) NodeAddr=n1":                                  "",
		"NodeName=n1 NodeAddr=n1":                                              "",
		"NodeName=n1 GresDrain=N/A GresUsed=gpu:0 Gres=gpu:2":                  "gpu:2",
		"NodeName=n1 Gres=gpu:2 Reason=Gres=gpu:99":                            "gpu:2",
		"": "",
	} {
		if got := parseNodeGres(out); got != want {
			t.Errorf("parseNodeGres(%q) = %q, want %q", out, got, want)
		}
	}
}

func TestCheckNamesRefusesWhatCouldBeAnOption(t *testing.T) {
	for _, s := range []string{"", "-h", "--help", "n1 n2", "n1\tx", "n\x1b[2J", "n\x7f", "n\n"} {
		if err := checkNames(s); !errors.Is(err, ErrBadArgument) {
			t.Errorf("checkNames(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"n1", "n[1-3],m1", "lnode-1.cluster", "gpu:a100:4(S:0-1)"} {
		if err := checkNames(s); err != nil {
			t.Errorf("checkNames(%q) = %v", s, err)
		}
	}
}

func TestRunningJobOwnerAsksForTheJobRunningOnTheNode(t *testing.T) {
	r := standIn(t, "squeue", `[ "$*" = "--noheader --jobs 42 --nodelist lnode1 --states RUNNING --format %U" ] && echo 1001`)
	uid, running, err := r.RunningJobOwner(context.Background(), 42, "lnode1")
	if err != nil || !running || uid != 1001 {
		t.Fatalf("got %d, %v, %v", uid, running, err)
	}
	if _, _, err := r.RunningJobOwner(context.Background(), 42, "--all"); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("a node name that is an option: got %v", err)
	}
	r = standIn(t, "squeue", `echo 'squeue: error: Invalid job id specified' >&2; exit 1`)
	_, _, err = r.RunningJobOwner(context.Background(), 42, "lnode1")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Stderr != "squeue: error: Invalid job id specified" {
		t.Fatalf("got %v", err)
	}
}

func TestExcNodeListReadsStateAndList(t *testing.T) {
	for _, tc := range []struct {
		name, out, list string
		pending, bad    bool
	}{
		{"pending with a list", "PENDING n[1-2],m1\n", "n[1-2],m1", true, false},
		{"pending without", "PENDING \n", "", true, false},
		{"pending, (null) left to the caller", "PENDING (null)\n", "(null)", true, false},
		{"requeued counts as pending", "REQUEUED n1\n", "n1", true, false},
		{"running is not", "RUNNING n1\n", "", false, false},
		{"gone is not", "", "", false, false},
		{"two jobs refused", "PENDING n1\nPENDING n2\n", "", false, true},
		{"control characters refused", "PENDING n1\x1b[2J\n", "", false, true},
		{"an option refused", "PENDING -x\n", "", false, true},
		{"spaces read as Slurm reads them", "PENDING n1, n2 n[3-4,\tm1]\n", "n1,n2,n[3-4,m1]", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := standIn(t, "squeue", `[ "$*" = "-h -j 9 -o %T %x" ] || exit 3; printf '`+strings.ReplaceAll(tc.out, "\x1b", `\033`)+`'`)
			list, pending, err := r.ExcNodeList(context.Background(), 9)
			if (err != nil) != tc.bad || list != tc.list || pending != tc.pending {
				t.Fatalf("got %q, %v, %v", list, pending, err)
			}
		})
	}
}

func TestSetExcNodeListSaysWhenTheJobStarted(t *testing.T) {
	r := standIn(t, "scontrol", `[ "$*" = "update JobId=9 ExcNodeList=n1,n2" ] || exit 3`)
	if err := r.SetExcNodeList(context.Background(), 9, "n1,n2"); err != nil {
		t.Fatal(err)
	}
	r = standIn(t, "scontrol", `[ "$*" = "update JobId=9 ExcNodeList=" ] || exit 3`)
	if err := r.SetExcNodeList(context.Background(), 9, ""); err != nil {
		t.Fatalf("clearing: %v", err)
	}
	r = standIn(t, "scontrol", `echo 'slurm_update error: Job is no longer pending execution' >&2; exit 1`)
	err := r.SetExcNodeList(context.Background(), 9, "n1")
	if !errors.Is(err, ErrJobNotPending) || !strings.Contains(err.Error(), "no longer pending execution") {
		t.Fatalf("got %v, want ErrJobNotPending", err)
	}
	r = standIn(t, "scontrol", `echo 'slurm_update error: Invalid node name specified' >&2; exit 1`)
	if err := r.SetExcNodeList(context.Background(), 9, "n1"); err == nil || errors.Is(err, ErrJobNotPending) {
		t.Fatalf("another refusal: got %v", err)
	}
	if err := r.SetExcNodeList(context.Background(), 9, "n1 n2"); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("a list with a space: got %v", err)
	}
}

func TestHostnamesExpandsAList(t *testing.T) {
	r := standIn(t, "scontrol", `[ "$1 $2" = "show hostnames" ] || exit 3; echo n1; echo n2; echo m1`)
	names, err := r.Hostnames(context.Background(), "n[1-2],m1")
	if err != nil || strings.Join(names, ",") != "n1,n2,m1" {
		t.Fatalf("got %v, %v", names, err)
	}
	if _, err := r.Hostnames(context.Background(), "-o"); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("an option: got %v", err)
	}
}

func TestRequeueNamesTheJob(t *testing.T) {
	r := standIn(t, "scontrol", `[ "$*" = "requeue 77" ] || { echo "asked $*" >&2; exit 1; }`)
	if err := r.Requeue(context.Background(), 77); err != nil {
		t.Fatal(err)
	}
	if err := r.Requeue(context.Background(), 78); err == nil || !strings.Contains(err.Error(), "asked requeue 78") {
		t.Fatalf("got %v", err)
	}
}

// A job that can never be requeued (srun/salloc, --no-requeue) is told
// apart from a refusal that may pass later.
func TestRequeueSaysWhenTheJobCannotBeRequeued(t *testing.T) {
	for _, msg := range []string{"Requested operation is presently disabled for job 77", "Only batch jobs are accepted or processed for job 77"} {
		r := standIn(t, "scontrol", `echo '`+msg+`' >&2; exit 1`)
		if err := r.Requeue(context.Background(), 77); !errors.Is(err, ErrNotRequeueable) {
			t.Fatalf("%s: got %v, want ErrNotRequeueable", msg, err)
		}
	}
	r := standIn(t, "scontrol", `echo 'Job is pending execution for job 77' >&2; exit 1`)
	if err := r.Requeue(context.Background(), 77); err == nil || errors.Is(err, ErrNotRequeueable) {
		t.Fatalf("another refusal: got %v", err)
	}
}

func TestCancelNamesTheJob(t *testing.T) {
	r := standIn(t, "scancel", `[ "$*" = "77" ] || { echo "asked $*" >&2; exit 1; }`)
	if err := r.Cancel(context.Background(), 77); err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(context.Background(), 78); err == nil {
		t.Fatal("a failed scancel was not reported")
	}
}

func TestNodeGresAsksForTheNode(t *testing.T) {
	r := standIn(t, "scontrol", `[ "$*" = "show node lnode1 --oneliner" ] || exit 3; echo 'NodeName=lnode1 Gres=gpu:v100:2 State=IDLE'`)
	g, err := r.NodeGres(context.Background(), "lnode1")
	if err != nil || g != "gpu:v100:2" {
		t.Fatalf("got %q, %v", g, err)
	}
	r = standIn(t, "scontrol", `printf 'NodeName=lnode1 Gres=gpu:\033[2J:2\n'`)
	if _, err := r.NodeGres(context.Background(), "lnode1"); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("control characters: got %v", err)
	}
}

func TestParseJobGPUFigures(t *testing.T) {
	out := "12|cpu=00:00:00|cpu=00:00:00\n" +
		"12.batch|cpu=00:00:01,gres/gpumem=104857600,gres/gpuutil=40|cpu=00:00:01,gres/gpumem=209715200,gres/gpuutil=90\n" +
		"12.0|gres/gpuutil=55|gres/gpumem=104857600\n" +
		"13|cpu=1|cpu=1\n13.batch|cpu=1,gres/gpuutil=-3|cpu=1,gres/gpumem=NaN\n" +
		"14_2.batch|gres/gpuutil=7|\n" +
		"garbage\n-1|gres/gpuutil=5|\n"
	got := parseJobGPUFigures(out)
	if g := got[12]; g.UtilPct != 55 || g.MemBytes != 209715200 {
		t.Errorf("job 12: %+v, want the highest average (55) and peak memory (200 MiB) over its steps", g)
	}
	if g, ok := got[13]; !ok || !math.IsNaN(g.UtilPct) || !math.IsNaN(g.MemBytes) {
		t.Errorf("job 13: %+v, %v; want known, both not reported", g, ok)
	}
	if g := got[14]; g.UtilPct != 7 {
		t.Errorf("array job 14: %+v", g)
	}
	if len(got) != 3 {
		t.Errorf("%d jobs, want 3: %+v", len(got), got)
	}
}

func TestParseAccountDescriptions(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []AccountDescription
		bad       string // in the error; "" = no error
	}{
		{"accounts and their descriptions", "root|default root account\nvision|vision lab; lachesis-quota=2 nodes of 8 gpus\n",
			[]AccountDescription{{"root", "default root account"}, {"vision", "vision lab; lachesis-quota=2 nodes of 8 gpus"}}, ""},
		{"an empty description kept", "a|\n", []AccountDescription{{"a", ""}}, ""},
		{"a bar in a description stays in it", "a|x|y|lachesis-quota=1 gpu\n", []AccountDescription{{"a", "x|y|lachesis-quota=1 gpu"}}, ""},
		{"a newline in a description continues it", "a|first\nsecond\nb|x\n", []AccountDescription{{"a", "first\nsecond"}, {"b", "x"}}, ""},
		{"nothing listed: no accounts", "", nil, ""},
		{"a first line without an account refused", "garbage\na|x\n", nil, "names no account"},
		{"an account twice refused", "a|x\nb|y\na|lachesis-quota=64 gpus\n", nil, "twice"},
		{"a name with a space refused", "a b|x\n", nil, "not an account name"},
		{"a name with a control character refused", "a\x1b[2J|x\n", nil, "not an account name"},
		{"an empty name refused", "|x\n", nil, "not an account name"},
		{"a huge name refused", strings.Repeat("a", 300) + "|x\n", nil, "not an account name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAccountDescriptions(tc.out)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) || len(err.Error()) > 200 {
					t.Fatalf("got %v, want an error (bounded) saying %q", err, tc.bad)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %q; want %q", got, tc.want)
				}
			}
		})
	}
	// More accounts than the bound: refused, not cut.
	var b strings.Builder
	for i := 0; i <= MaxAccountsListed; i++ {
		fmt.Fprintf(&b, "a%d|\n", i)
	}
	if _, err := parseAccountDescriptions(b.String()); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("%d accounts: %v", MaxAccountsListed+1, err)
	}
}

func TestAccountDescriptionsAsksSacctmgr(t *testing.T) {
	r := standIn(t, "sacctmgr", `[ "$*" = "--noheader --parsable2 show account format=Account,Description" ] && echo 'own|lachesis-quota=4 gpus'`)
	got, err := r.AccountDescriptions(context.Background())
	if err != nil || len(got) != 1 || got[0] != (AccountDescription{"own", "lachesis-quota=4 gpus"}) {
		t.Fatalf("got %q, %v", got, err)
	}
	// No slurmdbd: sacctmgr's complaint is the error.
	r = standIn(t, "sacctmgr", `echo 'sacctmgr: error: Problem talking to the database: Connection refused' >&2; exit 1`)
	_, err = r.AccountDescriptions(context.Background())
	var exit *ExitError
	if !errors.As(err, &exit) || !strings.Contains(exit.Stderr, "Connection refused") {
		t.Fatalf("got %v", err)
	}
}

func TestParseAccountParents(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      map[string]string
		bad       string // in the error; "" = no error
	}{
		{"accounts and their parents, users skipped", "root||\nroot|root|\nown||root\nown|alice|\nsub||own\nsub|alice|\n",
			map[string]string{"root": "", "own": "root", "sub": "own"}, ""},
		{"names lower-cased as slurmdbd stores them", "Vision||ROOT\n", map[string]string{"vision": "root"}, ""},
		{"nothing listed: no associations", "", map[string]string{}, ""},
		{"an account association twice refused", "own||root\nown||sub\n", nil, "twice"},
		{"a line of two fields refused", "own|root\n", nil, "is not account|user|parent"},
		{"a line of four fields refused", "own||root|x\n", nil, "is not account|user|parent"},
		{"an empty account refused", "||root\n", nil, "is not an account and its parent"},
		{"a parent with a control character refused", "own||ro\x1bot\n", nil, "is not an account and its parent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAccountParents(tc.out)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) || len(err.Error()) > 200 {
					t.Fatalf("got %v, want an error (bounded) saying %q", err, tc.bad)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// More account associations than the bound: refused, not cut.
	var b strings.Builder
	for i := 0; i <= MaxAccountsListed; i++ {
		fmt.Fprintf(&b, "a%d||root\n", i)
	}
	if _, err := parseAccountParents(b.String()); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("%d account associations: %v", MaxAccountsListed+1, err)
	}
}

func TestAccountParentsAsksSacctmgrForTheCluster(t *testing.T) {
	r := standIn(t, "sacctmgr", `[ "$*" = "--noheader --parsable2 show association where cluster=gpu format=Account,User,ParentName" ] && echo 'own||root'`)
	got, err := r.AccountParents(context.Background(), "gpu")
	if err != nil || !maps.Equal(got, map[string]string{"own": "root"}) {
		t.Fatalf("got %q, %v", got, err)
	}
	// A cluster name that would change sacctmgr's condition is never sent.
	for _, cluster := range []string{"", "gpu format=User", "a,b", "x=y"} {
		if _, err := r.AccountParents(context.Background(), cluster); err == nil || !strings.Contains(err.Error(), "cluster name") {
			t.Errorf("cluster %q: %v", cluster, err)
		}
	}
}
