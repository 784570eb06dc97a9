package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lachesis-sched/lachesis/internal/chart"
	lconfig "github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/util/printable"
)

// errNoProfile: show was asked about a model nobody profiled.
var errNoProfile = errors.New("no profile")

func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", "", "the controller's SQLite file (default: db_path of lachesis.yaml next to $SLURM_CONF or /etc/slurm/slurm.conf)")
}

// controllerConfig is the controller's lachesis.yaml (the one next to
// $SLURM_CONF or /etc/slurm/slurm.conf, or $LACHESIS_CONFIG) and its path;
// a missing file is the defaults.
func controllerConfig() (lconfig.Config, string, error) {
	slurmConf := os.Getenv("SLURM_CONF")
	if slurmConf == "" {
		slurmConf = "/etc/slurm/slurm.conf"
	}
	path := lconfig.PathNextTo(slurmConf)
	cfg, err := lconfig.Load(path)
	return cfg, path, err
}

// dbPath is --db, else db_path of the lachesis.yaml next to slurm.conf.
func dbPath(db string) (string, error) {
	if db != "" {
		return db, nil
	}
	cfg, _, err := controllerConfig()
	if err != nil {
		return "", fmt.Errorf("finding the controller's database: %w (or pass --db)", err)
	}
	return cfg.DBPath, nil
}

// openStore opens the controller's database read-only, finding it through
// lachesis.yaml unless --db names it.
func openStore(db string) (*profilestore.Store, error) {
	db, err := dbPath(db)
	if err != nil {
		return nil, err
	}
	s, err := profilestore.OpenReadOnly(db)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w (run this on the slurmctld host, or pass --db)", err)
	case errors.Is(err, os.ErrPermission) || (err != nil && strings.Contains(err.Error(), "permission denied")):
		return nil, fmt.Errorf("%w (run as root or SlurmUser on the slurmctld host)", err)
	}
	return s, err
}

func noArgs(fs *flag.FlagSet, args []string) error {
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, rest)
	}
	return nil
}

// storeTable prints rows read from the controller's database as a
// table under header, or empty when there are none. Every field that
// users chose (model keys, job names, nodes) goes through
// printable.String first, so it cannot drive the admin's terminal.
func storeTable(stdout io.Writer, header, empty string, rows [][]string) error {
	if len(rows) == 0 {
		fmt.Fprintln(stdout, empty)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		for i := range r {
			r[i] = printable.String(r[i])
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func cmdList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("list", stderr)
	db := dbFlag(fs)
	if err := noArgs(fs, args); err != nil {
		return err
	}
	s, err := openStore(*db)
	if err != nil {
		return err
	}
	defer s.Close()
	list, err := s.List()
	if err != nil {
		return err
	}
	rows := make([][]string, len(list))
	for i, r := range list {
		rows[i] = []string{r.Model, strconv.Itoa(r.Profiles), strconv.Itoa(r.Best.CPUsPerGPU),
			fmt.Sprintf("%.2f", r.Best.MemGBPerGPU), strconv.Itoa(r.Points), r.Node, r.User,
			r.Finished.Local().Format(time.DateTime)}
	}
	return storeTable(stdout, "MODEL\tPROFILES\tBEST CPUS/GPU\tBEST MEM GB/GPU\tPOINTS\tNODE\tUSER\tFINISHED",
		"no profiles yet (see `lachesis-profiler missing` for models jobs are waiting on)", rows)
}

func cmdShow(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("show", stderr)
	db := dbFlag(fs)
	plot := fs.String("plot", "", "also write a chart of throughput against CPUs to this .png or .svg file")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		fmt.Fprintln(stderr, "show needs one MODEL")
		fs.Usage()
		return errUsage
	}
	model := rest[0]
	format := ""
	if *plot != "" {
		switch strings.ToLower(filepath.Ext(*plot)) {
		case ".png":
			format = "png"
		case ".svg":
			format = "svg"
		default:
			return fmt.Errorf("%w: --plot %s: the file must end in .png or .svg", errUsage, *plot)
		}
	}
	s, err := openStore(*db)
	if err != nil {
		return err
	}
	defer s.Close()
	rec, ok, err := s.Latest(model)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w for model %q (`lachesis-profiler list` shows the profiled models)", errNoProfile, model)
	}
	// Names the profiling user and node chose reach the terminal and chart.
	rec.Model, rec.Node, rec.User = printable.String(rec.Model), printable.String(rec.Node), printable.String(rec.User)
	if err := chart.Render(stdout, rec, "text"); err != nil {
		return err
	}
	if format == "" {
		return nil
	}
	var buf bytes.Buffer
	if err := chart.Render(&buf, rec, format); err != nil {
		return err
	}
	if err := os.WriteFile(*plot, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "chart written to %s\n", *plot)
	return nil
}

// cmdMissing lists the model keys worth profiling: GPU jobs were sized
// without a profile for each (job_submit notes only those), the most
// submitted first, then those waiting longest. A job without
// --comment=model= is keyed by its name, and most names are seen once, so
// by default only keys of at least --min-jobs jobs are shown, at most
// --limit of them, and a last line counts what was left out.
func cmdMissing(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("missing", stderr)
	db := dbFlag(fs)
	limit := fs.Int("limit", 20, "show at most this many keys (0: all)")
	minJobs := fs.Int("min-jobs", 2, "show only keys seen in at least this many jobs")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	s, err := openStore(*db)
	if err != nil {
		return err
	}
	defer s.Close()
	keys, err := s.Missing()
	if err != nil {
		return err
	}
	var rows [][]string
	few, over := 0, 0
	for _, k := range keys {
		switch {
		case k.Jobs < *minJobs:
			few++
		case *limit > 0 && len(rows) >= *limit:
			over++
		default:
			rows = append(rows, []string{k.Key, strconv.Itoa(k.Jobs),
				k.FirstSeen.Local().Format(time.DateTime), k.LastSeen.Local().Format(time.DateTime)})
		}
	}
	empty := "every model key seen in submitted GPU jobs has a profile"
	if few+over > 0 {
		empty = "no model key without a profile was seen in enough jobs to list"
	}
	if err := storeTable(stdout, "MODEL KEY\tJOBS\tFIRST SEEN\tLAST SEEN", empty, rows); err != nil {
		return err
	}
	if few+over > 0 {
		fmt.Fprintf(stdout, "%d more keys not shown (%d beyond --limit %d, %d seen in fewer than --min-jobs %d jobs); --limit 0 --min-jobs 1 shows all\n",
			few+over, over, *limit, few, *minJobs)
	}
	return nil
}
