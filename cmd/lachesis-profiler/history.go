package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	lconfig "github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
)

// maxHistoryModel bounds a model key in the table (a user's own text).
const maxHistoryModel = 48

// cmdHistory lists each user's history of each model and what it says of
// their next one-GPU job of it under sharing.convert_* of lachesis.yaml
// (or the defaults, labelled, when the file cannot be read).
func cmdHistory(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("history", stderr)
	db := dbFlag(fs)
	limit := fs.Int("limit", 50, "show at most this many histories, those with the most recent job first (0: all)")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit must be 0 or more", errUsage)
	}
	conv, from := shardConvertRule()
	s, err := openLedger(*db)
	if err != nil {
		return err
	}
	defer s.Close()
	rows, err := s.ModelJobUses()
	if err != nil && strings.Contains(err.Error(), "no such table") {
		rows, err = nil, nil // a controller from before the rewrite into shards
	}
	if err != nil {
		return err
	}
	hist := ledger.ModelHistories(rows)
	if *limit > 0 && len(hist) > *limit {
		hist = hist[:*limit]
	}
	fmt.Fprintf(stdout, "rule: convert_below_pct %g, convert_mem_below_mb %d, convert_min_jobs %d (%s)\n",
		conv.BelowPct, conv.MemBelowMB, conv.MinJobs, from)
	table := make([][]string, 0, len(hist))
	for _, h := range hist {
		table = append(table, []string{userName(h.User), reasontext.Clip(h.Model, maxHistoryModel), strconv.Itoa(h.Jobs),
			fmt.Sprintf("%.0f", h.UtilPeak), fmt.Sprintf("%.1f", h.MemPeakMB/1024), formatTime(h.LastFinished), nextJob(conv, h)})
	}
	return storeTable(stdout, "USER\tMODEL\tJOBS\tPEAK UTIL %\tPEAK MEM GiB\tLAST ENDED\tNEXT ONE-GPU JOB",
		"no user's history yet (a finished one-GPU job of a model, measured at least 3 times, starts its user's)", table)
}

// shardConvertRule is sharing.convert_* of the controller's lachesis.yaml,
// and where they come from: the file, or the defaults when it is missing
// or refused.
func shardConvertRule() (lconfig.ShardConvert, string) {
	cfg, path, err := controllerConfig()
	switch {
	case err != nil:
		return lconfig.Default().Sharing.Convert, fmt.Sprintf("defaults: %s not read: %v", path, err)
	case !fileExists(path):
		return cfg.Sharing.Convert, "defaults: no " + path
	}
	return cfg.Sharing.Convert, "from " + path
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// nextJob is what the history says of the user's next one-GPU job of the
// model; where it says shards, the job must also ask for one untyped GPU
// on one node, and the partition's GPU nodes have shards.
func nextJob(conv lconfig.ShardConvert, h ledger.ModelHistory) string {
	if !conv.Enabled() {
		return "whole (convert_below_pct is 0: off)"
	}
	switch conv.JudgeHistory(h.Jobs, h.UtilPeak, h.MemPeakMB) {
	case lconfig.ConvertFewJobs:
		return fmt.Sprintf("whole: %d of %d jobs measured", h.Jobs, conv.MinJobs)
	case lconfig.ConvertBusy:
		return fmt.Sprintf("whole: peak util %.0f%% >= %g%%", h.UtilPeak, conv.BelowPct)
	case lconfig.ConvertMemory:
		return fmt.Sprintf("whole: peak mem %.0f MB >= %d MB", h.MemPeakMB, conv.MemBelowMB)
	}
	return "shards"
}
