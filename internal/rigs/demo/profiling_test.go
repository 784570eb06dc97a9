package demo

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func validProfileDemo() ProfileDemo {
	return ProfileDemo{Root: "/repo", Dir: "/tmp/lachesis-dp", Bin: "/repo/bin", User: "lachesis-demo",
		Model: "imagecnn", PointSeconds: 30, JobSteps: 100, Python: "python3"}
}

func TestProfileDemoValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*ProfileDemo)
		ok     bool
	}{
		{"the defaults are accepted", func(*ProfileDemo) {}, true},
		{"root as the user is refused", func(d *ProfileDemo) { d.User = "root" }, false},
		{"no user is refused", func(d *ProfileDemo) { d.User = "" }, false},
		{"a model with a comma is refused", func(d *ProfileDemo) { d.Model = "a,b" }, false},
		{"a model with a space is refused", func(d *ProfileDemo) { d.Model = "a b" }, false},
		{"no model is refused", func(d *ProfileDemo) { d.Model = "" }, false},
		{"5 s points are refused", func(d *ProfileDemo) { d.PointSeconds = 5 }, false},
		{"10 s points are accepted", func(d *ProfileDemo) { d.PointSeconds = 10 }, true},
		{"a job of no steps is refused", func(d *ProfileDemo) { d.JobSteps = 0 }, false},
		{"no bin directory is refused", func(d *ProfileDemo) { d.Bin = "" }, false},
		{"a directory too long for the socket is refused", func(d *ProfileDemo) { d.Dir = "/tmp/" + strings.Repeat("d", 60) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := validProfileDemo()
			tc.change(&d)
			err := d.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrProfileDemo) {
				t.Fatalf("error %v does not wrap ErrProfileDemo", err)
			}
		})
	}
}

func TestProfileArgsRunTheScriptAsTheUserWithTheTrainingRegex(t *testing.T) {
	d := validProfileDemo()
	argv := d.asUser(d.profileArgs())
	if !slices.Equal(argv[:4], []string{"runuser", "-u", "lachesis-demo", "--"}) {
		t.Fatalf("not run as the user: %q", argv)
	}
	flag := func(name string) string {
		i := slices.Index(argv, name)
		if i < 0 || i+1 >= len(argv) {
			t.Fatalf("%s missing from %q", name, argv)
		}
		return argv[i+1]
	}
	if flag("--model") != "imagecnn" || flag("--regex") != TrainRegex || flag("--point-seconds") != "30" ||
		flag("--dataset") != "/tmp/lachesis-dp/work/data" || flag("--agent-socket") != "/tmp/lachesis-dp/agent.sock" {
		t.Fatalf("flags: %q", argv)
	}
	sep := slices.Index(argv[4:], "--") + 4
	if sep < 4 {
		t.Fatalf("no -- before the command: %q", argv)
	}
	if want := []string{"python3", "/tmp/lachesis-dp/work/train_image.py", "--data", "/tmp/lachesis-dp/work/data"}; !slices.Equal(argv[sep+1:], want) {
		t.Fatalf("command %q, want %q", argv[sep+1:], want)
	}
}

func TestTrainRegexReadsTheScriptsThroughputLine(t *testing.T) {
	re := regexp.MustCompile(TrainRegex)
	tests := []struct {
		line, want string
	}{
		{"step 120 loss 2.231 | 141.2 samples/s", "141.2"},
		{"step 7 loss 0.5 | 88 samples/s", "88"},
		{"training on 2 CPUs: 2 loader workers, 2 torch threads, 2048 images, batch 32", ""},
	}
	for _, tc := range tests {
		m := re.FindStringSubmatch(tc.line)
		got := ""
		if m != nil {
			got = m[1]
		}
		if got != tc.want {
			t.Errorf("%q: read %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestJobArgsNameTheModelAndLeaveCPUsAndMemoryToLachesis(t *testing.T) {
	argv := validProfileDemo().jobArgs()
	if !slices.Contains(argv, "--comment=model=imagecnn") || !slices.Contains(argv, "--gpus=1") {
		t.Fatalf("sbatch %q does not ask for one GPU of model imagecnn", argv)
	}
	for _, a := range argv {
		if strings.HasPrefix(a, "--cpus") || strings.HasPrefix(a, "--mem") || a == "-c" {
			t.Fatalf("sbatch %q sizes the job itself (%s)", argv, a)
		}
	}
	if wrap := argv[len(argv)-1]; !strings.Contains(wrap, "--steps 100") {
		t.Fatalf("the job is not bounded: %q", wrap)
	}
}

func TestHeadTailKeepsTheFirstLineAndTheLastN(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"a long output keeps line 1 and the last 2", "a\nb\nc\nd\ne\n", "a\nd\ne"},
		{"an output of n+1 lines is whole", "a\nb\nc\n", "a\nb\nc"},
		{"a short output is whole", "a\n", "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := headTail(tc.in, 2); got != tc.want {
				t.Fatalf("headTail(%q, 2) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
