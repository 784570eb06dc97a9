package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
)

// openLedger opens the controller's ledger read-only, found like openStore
// finds it (they are one SQLite file).
func openLedger(db string) (*ledger.SQLite, error) {
	db, err := dbPath(db)
	if err != nil {
		return nil, err
	}
	s, err := ledger.OpenReadOnly(db)
	switch {
	case errors.Is(err, os.ErrNotExist) || (err != nil && strings.Contains(err.Error(), "no such file")):
		return nil, fmt.Errorf("%w (run this on the slurmctld host, or pass --db)", err)
	case err != nil && (errors.Is(err, os.ErrPermission) || strings.Contains(err.Error(), "permission denied")):
		return nil, fmt.Errorf("%w (run as root or SlurmUser on the slurmctld host)", err)
	}
	return s, err
}

// jobGPUUses reads the summaries; a ledger of a controller from before
// per-job GPU use has none.
func jobGPUUses(s *ledger.SQLite, limit int) ([]ledger.JobGPUUse, error) {
	uses, err := s.JobGPUUses(limit)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return nil, nil
	}
	return uses, err
}

// userName is uid's login name, else the number.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return id
}

func formatTime(unix int64) string {
	if unix == 0 {
		return "-"
	}
	return time.Unix(unix, 0).Local().Format(time.DateTime)
}

func formatRate(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// cmdJobs lists what jobs did with their GPUs, as node agents measured it:
// the summaries the controller keeps in its ledger (job_gpu_use).
func cmdJobs(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("jobs", stderr)
	db := dbFlag(fs)
	limit := fs.Int("limit", 50, "show at most this many jobs, those measured most recently first (0: all)")
	withSlurm := fs.Bool("slurm", true, "beside the agents' figures, Slurm's own (sacct's gres/gpuutil and gres/gpumem, Slurm 23.02+ with NVML)")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	s, err := openLedger(*db)
	if err != nil {
		return err
	}
	defer s.Close()
	uses, err := jobGPUUses(s, *limit)
	if err != nil {
		return err
	}
	var slurm map[uint32]slurmcmd.JobGPUFigures
	var slurmErr error
	if *withSlurm {
		ids := make([]uint32, len(uses))
		for i := range uses {
			ids[i] = uses[i].JobID
		}
		slurm, slurmErr = slurmGPUFigures(ids)
	}
	rows := make([][]string, 0, len(uses))
	for i := range uses {
		u := &uses[i]
		ips := math.NaN()
		if u.ProgressSamples > 0 {
			ips = u.ItersPerSecLast
		}
		state := "running"
		if u.Finished != 0 {
			state = "ended"
		}
		row := []string{strconv.FormatUint(uint64(u.JobID), 10), userName(u.User), state,
			strconv.FormatInt(u.Samples, 10), fmt.Sprintf("%.0f", u.MeanUtil()), fmt.Sprintf("%.0f", u.UtilPeak),
			fmt.Sprintf("%.1f", u.MemPeakMB/1024), strconv.Itoa(u.GPUsMax), strconv.Itoa(u.SharersMax),
			formatRate(ips), formatRate(u.MeanItersPerSec()), formatTime(u.FirstSeen), formatTime(u.LastSeen)}
		if *withSlurm {
			f, ok := slurm[u.JobID]
			if !ok {
				f = slurmcmd.JobGPUFigures{UtilPct: math.NaN(), MemBytes: math.NaN()}
			}
			row = append(row, slurmFigure(f.UtilPct, 1, "%.0f"), slurmFigure(f.MemBytes, 1<<30, "%.1f"))
		}
		rows = append(rows, row)
	}
	header := "JOB\tUSER\tSTATE\tSAMPLES\tMEAN UTIL %\tPEAK UTIL %\tPEAK MEM GiB/GPU\tGPUS\tMAX SHARERS\tIT/S\tMEAN IT/S\tFIRST SEEN\tLAST SEEN"
	if *withSlurm {
		header += "\tSLURM UTIL %\tSLURM PEAK MEM GiB"
	}
	if err := storeTable(stdout, header, "no job's GPU use reported yet (node agents report it every telemetry interval)", rows); err != nil {
		return err
	}
	if *withSlurm && len(rows) > 0 {
		fmt.Fprintln(stdout, slurmFiguresNote(slurm, slurmErr))
	}
	return nil
}

// slurmGPUFigures is Slurm's own GPU figures of jobs (sacct, through
// internal/slurmcmd), MaxSacctJobs at a time; a variable so tests answer
// without Slurm.
var slurmGPUFigures = func(ids []uint32) (map[uint32]slurmcmd.JobGPUFigures, error) {
	out := map[uint32]slurmcmd.JobGPUFigures{}
	r := slurmcmd.Runner{Timeout: 20 * time.Second}
	for len(ids) > 0 {
		n := min(len(ids), slurmcmd.MaxSacctJobs)
		figs, err := r.JobGPUFigures(context.Background(), ids[:n])
		if err != nil {
			return out, err
		}
		for id, f := range figs {
			out[id] = f
		}
		ids = ids[n:]
	}
	return out, nil
}

// slurmFigure is one of Slurm's figures in unit, n/a where Slurm reported
// none.
func slurmFigure(v, unit float64, format string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf(format, v/unit)
}

// slurmFiguresNote says where Slurm's columns come from and why a cell
// may be n/a: the agents measure every job on every GPU (NVML, or the
// fake device on test clusters), Slurm only where its gpu/nvml plugin
// does and accounting keeps the TRES.
func slurmFiguresNote(figs map[uint32]slurmcmd.JobGPUFigures, err error) string {
	const why = "n/a (not reported by Slurm): Slurm reports gres/gpuutil and gres/gpumem only from 23.02, with AccountingStorageTRES listing them, for GPUs slurmd reads through NVML (AutoDetect=nvml); never for the fake GPU device of test clusters"
	if err != nil {
		return fmt.Sprintf("note: Slurm's own GPU figures could not be read (%v); %s", err, why)
	}
	for _, f := range figs {
		if !math.IsNaN(f.UtilPct) || !math.IsNaN(f.MemBytes) {
			return "note: SLURM columns are sacct's (the highest step average utilisation, summed over the job's processes, and peak memory); they should agree with the agents' MEAN UTIL % and PEAK MEM (per GPU: Slurm's is the job's total). " + why
		}
	}
	return "note: " + why
}

// cmdIdle lists running jobs that hold GPUs below a utilisation for at
// least a duration. The controller tracks each job's idle time at
// usage.idle_below_pct (the row records which); --below other than that is
// answered from what the row holds: lower, a job counts only if no sample
// since it fell idle reached --below; higher, only jobs idle at the
// tracked threshold are known.
func cmdIdle(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("idle", stderr)
	db := dbFlag(fs)
	below := fs.Float64("below", math.NaN(), "utilisation percentage (default: usage.idle_below_pct of lachesis.yaml)")
	after := fs.Duration("for", -1, "for at least this long, e.g. 30m (default: usage.idle_after of lachesis.yaml)")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if math.IsNaN(*below) || *after < 0 {
		cfg, _, err := controllerConfig()
		if err != nil {
			return fmt.Errorf("reading the idle rule: %w (or pass --below and --for)", err)
		}
		if math.IsNaN(*below) {
			*below = cfg.GPUUse.IdleBelowPct
		}
		if *after < 0 {
			*after = cfg.GPUUse.IdleAfter
		}
	}
	if !(*below >= 0 && *below <= 100) {
		return fmt.Errorf("%w: --below must be a percentage, 0 to 100", errUsage)
	}
	s, err := openLedger(*db)
	if err != nil {
		return err
	}
	defer s.Close()
	uses, err := jobGPUUses(s, 0)
	if err != nil {
		return err
	}
	// The longest idle first.
	slices.SortStableFunc(uses, func(a, b ledger.JobGPUUse) int { return cmp.Compare(a.IdleSince, b.IdleSince) })
	now := time.Now().Unix()
	var rows [][]string
	tracked := map[float64]bool{}
	for i := range uses {
		u := &uses[i]
		if u.Finished != 0 {
			continue
		}
		tracked[u.IdleBelowPct] = true
		if !u.IdleAt(*below, now, int64(after.Seconds())) {
			continue
		}
		rows = append(rows, []string{strconv.FormatUint(uint64(u.JobID), 10), userName(u.User),
			(time.Duration(u.IdleFor(now)) * time.Second).String(), fmt.Sprintf("%.1f", u.IdlePeak),
			fmt.Sprintf("%.0f", u.MeanUtil()), strconv.Itoa(u.GPUsMax), formatTime(u.LastSeen)})
	}
	err = storeTable(stdout, "JOB\tUSER\tIDLE FOR\tPEAK UTIL % SINCE\tMEAN UTIL %\tGPUS\tLAST REPORT",
		fmt.Sprintf("no running job held its GPUs below %g%% for %v", *below, *after), rows)
	for t := range tracked {
		if t != *below {
			fmt.Fprintf(stdout, "note: the controller tracks idle time at %g%% (usage.idle_below_pct); at --below %g%% the list is a lower bound\n", t, *below)
			break
		}
	}
	return err
}
