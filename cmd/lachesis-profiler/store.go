package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lachesis-sched/lachesis/internal/chart"
	lconfig "github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
)

// errNoProfile: show was asked about a model nobody profiled.
var errNoProfile = errors.New("no profile")

func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", "", "the controller's SQLite file (default: db_path of lachesis.yaml next to $SLURM_CONF or /etc/slurm/slurm.conf)")
}

// dbPath is --db, else db_path of the lachesis.yaml next to slurm.conf.
func dbPath(db string) (string, error) {
	if db != "" {
		return db, nil
	}
	slurmConf := os.Getenv("SLURM_CONF")
	if slurmConf == "" {
		slurmConf = "/etc/slurm/slurm.conf"
	}
	cfg, err := lconfig.Load(lconfig.PathNextTo(slurmConf))
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

// storeTable is a subcommand that takes only --db and prints rows read
// from the controller's database as a table under header, or empty when
// there are none.
func storeTable(name string, args []string, stdout, stderr io.Writer, header, empty string,
	rows func(*profilestore.Store) ([]string, error)) error {
	fs := newFlags(name, stderr)
	db := dbFlag(fs)
	if err := noArgs(fs, args); err != nil {
		return err
	}
	s, err := openStore(*db)
	if err != nil {
		return err
	}
	defer s.Close()
	lines, err := rows(s)
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		fmt.Fprintln(stdout, empty)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, l := range lines {
		fmt.Fprintln(tw, l)
	}
	return tw.Flush()
}

func cmdList(args []string, stdout, stderr io.Writer) error {
	return storeTable("list", args, stdout, stderr,
		"MODEL\tPROFILES\tBEST CPUS/GPU\tBEST MEM GB/GPU\tPOINTS\tNODE\tUSER\tFINISHED",
		"no profiles yet (see `lachesis-profiler missing` for models jobs are waiting on)",
		func(s *profilestore.Store) ([]string, error) {
			rows, err := s.List()
			lines := make([]string, len(rows))
			for i, r := range rows {
				lines[i] = fmt.Sprintf("%s\t%d\t%d\t%.2f\t%d\t%s\t%s\t%s", r.Model, r.Profiles, r.Best.CPUsPerGPU,
					r.Best.MemGBPerGPU, r.Points, r.Node, r.User, r.Finished.Local().Format(time.DateTime))
			}
			return lines, err
		})
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

func cmdMissing(args []string, stdout, stderr io.Writer) error {
	return storeTable("missing", args, stdout, stderr,
		"MODEL KEY\tJOBS\tFIRST SEEN\tLAST SEEN",
		"every model key seen in submitted jobs has a profile",
		func(s *profilestore.Store) ([]string, error) {
			keys, err := s.Missing()
			lines := make([]string, len(keys))
			for i, k := range keys {
				lines[i] = fmt.Sprintf("%s\t%d\t%s\t%s", k.Key, k.Jobs,
					k.FirstSeen.Local().Format(time.DateTime), k.LastSeen.Local().Format(time.DateTime))
			}
			return lines, err
		})
}
