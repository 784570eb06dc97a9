package trace

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SacctFormat is the sacct field list ReadSacct expects when the input has
// no header line. Produce it with
//
//	sacct --allusers --duplicates --parsable2 --noheader \
//	      --starttime=2024-05-01 --endtime=2024-06-01 \
//	      --format=JobIDRaw,JobName,Submit,Start,End,Elapsed,AllocTRES,State,Comment
//
// --duplicates is what makes sacct list every run of a requeued job (same
// JobIDRaw, one line per run) instead of only the last. Input with a
// header line (sacct without --noheader) may list these fields in any
// order, among others.
const SacctFormat = "JobIDRaw,JobName,Submit,Start,End,Elapsed,AllocTRES,State,Comment"

// SacctFold says how the runs of a requeued job make up its duration.
type SacctFold string

const (
	// FoldLast takes the last run's elapsed time: a requeued job restarts
	// from scratch (Slurm's default without application checkpoints), so
	// the last, complete run is the job's real length.
	FoldLast SacctFold = "last"
	// FoldSum adds up every run's elapsed time: right for jobs that
	// checkpoint and resume, where each run did part of the work.
	FoldSum SacctFold = "sum"
)

// SacctOptions tune ReadSacct.
type SacctOptions struct {
	Fold SacctFold // FoldLast when empty
}

// SacctStats counts what ReadSacct did with its input, so an admin can see
// how much of the history the replay covers.
type SacctStats struct {
	Lines       int // non-empty input lines, header excluded
	Steps       int // job-step lines (JobIDRaw with a '.'), ignored
	Jobs        int // jobs in the trace
	Requeued    int // jobs of more than one run, folded into one
	NoGPU       int // jobs without GPUs in AllocTRES, left out
	Unfinished  int // jobs still pending or running, left out
	NeverRan    int // jobs that ended without running (Elapsed 0), left out
	FirstSubmit time.Time
}

// ReadSacct reads `sacct --parsable2` output (see SacctFormat) and folds
// each job's runs into one Job:
//
//   - ID: JobIDRaw (array tasks have their own).
//   - Submit: the earliest Submit of its runs. Slurm resets the submit time
//     when it requeues a job, so only the first run has the original one.
//   - GPUs: gres/gpu in the last run's AllocTRES (the sum of the typed
//     gres/gpu:TYPE counts when there is no untyped one). Jobs without GPUs
//     are left out: Lachesis schedules GPU jobs.
//   - Duration: per opts.Fold, from Elapsed ([D-]HH:MM:SS).
//   - Model: "model=NAME" in Comment (what job_submit/synergy reads from
//     --comment), else the job name, as the plugin does.
//
// Jobs whose last run is still PENDING, RUNNING or REQUEUED, and jobs that
// never ran, are left out and counted. Wall-clock times without a zone
// (sacct's default) are read as UTC; only differences between them are
// used.
func ReadSacct(r io.Reader, opts SacctOptions) (*Trace, SacctStats, error) {
	var st SacctStats
	fold := opts.Fold
	switch fold {
	case "":
		fold = FoldLast
	case FoldLast, FoldSum:
	default:
		return nil, st, fmt.Errorf("%w: sacct fold %q is not %q or %q", ErrBadTrace, fold, FoldLast, FoldSum)
	}
	cols := map[string]int{}
	for i, name := range strings.Split(SacctFormat, ",") {
		cols[name] = i
	}
	want := len(cols)
	runs := map[uint32][]sacctRun{}
	var order []uint32
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Split(line, "|")
		if lineNo == 1 && strings.TrimSpace(fields[0]) == "JobIDRaw" {
			cols = map[string]int{}
			for i, f := range fields {
				cols[strings.TrimSpace(f)] = i
			}
			for _, name := range strings.Split(SacctFormat, ",") {
				if _, ok := cols[name]; !ok {
					return nil, st, fmt.Errorf("%w: sacct header lacks %s (need %s)", ErrBadTrace, name, SacctFormat)
				}
			}
			want = len(fields)
			continue
		}
		st.Lines++
		if len(fields) < want {
			return nil, st, fmt.Errorf("%w: sacct line %d: %d fields, want %d (%s)", ErrBadTrace, lineNo, len(fields), want, SacctFormat)
		}
		if c := cols["Comment"]; c == want-1 && len(fields) > want {
			// A '|' inside the free-text comment, the last field.
			fields[c] = strings.Join(fields[c:], "|")
		}
		get := func(name string) string { return strings.TrimSpace(fields[cols[name]]) }
		rawID := get("JobIDRaw")
		if strings.ContainsAny(rawID, ".") {
			st.Steps++
			continue
		}
		id, err := parseID(lineNo, "JobIDRaw", rawID)
		if err != nil {
			return nil, st, err
		}
		run, err := parseSacctRun(lineNo, get)
		if err != nil {
			return nil, st, err
		}
		if _, seen := runs[id]; !seen {
			order = append(order, id)
		}
		runs[id] = append(runs[id], run)
	}
	if err := sc.Err(); err != nil {
		return nil, st, err
	}

	t := &Trace{}
	var stamps []time.Time
	for _, id := range order {
		rs := runs[id]
		// Runs in the order they happened; sacct lists them so, but a
		// concatenation of several queries may not.
		slices.SortStableFunc(rs, func(a, b sacctRun) int { return a.submit.Compare(b.submit) })
		last := rs[len(rs)-1]
		if last.unfinished {
			st.Unfinished++
			continue
		}
		var dur float64
		for _, r := range rs {
			if fold == FoldSum || r.elapsed > 0 {
				if fold == FoldSum {
					dur += r.elapsed
				} else {
					dur = r.elapsed
				}
			}
		}
		if dur <= 0 {
			st.NeverRan++
			continue
		}
		if last.gpus == 0 {
			st.NoGPU++
			continue
		}
		if len(rs) > 1 {
			st.Requeued++
		}
		model := last.model
		if model == "" {
			model = last.name
		}
		stamps = append(stamps, rs[0].submit)
		t.Jobs = append(t.Jobs, Job{ID: id, GPUs: last.gpus, Duration: dur, Model: model})
	}
	if len(t.Jobs) == 0 {
		return nil, st, fmt.Errorf("%w: no finished GPU job in the sacct input (%d lines)", ErrBadTrace, st.Lines)
	}
	setWallClockSubmits(t, stamps)
	st.Jobs = len(t.Jobs)
	st.FirstSubmit = t.Start
	return t, st, t.Normalise()
}

// sacctRun is one line of a job: one run.
type sacctRun struct {
	name       string
	submit     time.Time
	elapsed    float64
	gpus       int
	unfinished bool
	model      string
}

func parseSacctRun(line int, get func(string) string) (sacctRun, error) {
	var r sacctRun
	r.name = get("JobName")
	var err error
	if r.submit, err = parseWallClock(get("Submit")); err != nil {
		return r, fmt.Errorf("%w: sacct line %d: Submit %q: %w", ErrBadTrace, line, get("Submit"), err)
	}
	if r.elapsed, err = parseElapsed(get("Elapsed")); err != nil {
		return r, fmt.Errorf("%w: sacct line %d: Elapsed: %w", ErrBadTrace, line, err)
	}
	if r.gpus, err = tresGPUs(get("AllocTRES")); err != nil {
		return r, fmt.Errorf("%w: sacct line %d: AllocTRES: %w", ErrBadTrace, line, err)
	}
	// "CANCELLED by 1000" and the like: the first word is the state.
	state, _, _ := strings.Cut(get("State"), " ")
	switch state {
	case "PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED":
		r.unfinished = true
	}
	r.model = commentModel(get("Comment"))
	return r, nil
}

// parseElapsed reads Slurm's [D-]HH:MM:SS, HH:MM:SS or MM:SS.
func parseElapsed(s string) (float64, error) {
	days := 0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not [D-]HH:MM:SS", s)
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("%q is not [D-]HH:MM:SS", s)
	}
	secs := 0.0
	for _, p := range parts {
		n, err := strconv.ParseFloat(p, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not [D-]HH:MM:SS", s)
		}
		secs = secs*60 + n
	}
	return float64(days)*86400 + secs, nil
}

// tresGPUs reads the GPU count from a TRES string such as
// "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1".
func tresGPUs(s string) (int, error) {
	untyped, typed, sawUntyped := 0, 0, false
	for _, item := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || (key != "gres/gpu" && !strings.HasPrefix(key, "gres/gpu:")) {
			continue // not a GPU count (gres/gpumem, gres/gpuutil, ...)
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q is not a count", key, val)
		}
		if key == "gres/gpu" {
			untyped, sawUntyped = n, true
		} else {
			typed += n
		}
	}
	if sawUntyped {
		return untyped, nil
	}
	return typed, nil
}

// commentModel finds "model=NAME" in a job's comment, which may hold other
// words separated by spaces, commas, semicolons or bars.
func commentModel(comment string) string {
	for _, word := range strings.FieldsFunc(comment, func(r rune) bool {
		return r == ' ' || r == ',' || r == ';' || r == '|' || r == '\t'
	}) {
		if name, ok := strings.CutPrefix(word, "model="); ok {
			return name
		}
	}
	return ""
}
