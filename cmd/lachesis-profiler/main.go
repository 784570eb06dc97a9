// Command lachesis-profiler profiles models for Lachesis's CPU and memory
// sizing (Synergy) and shows what the controller knows.
//
//	lachesis-profiler profile --model NAME [flags] -- COMMAND [ARGS...]
//	lachesis-profiler list    [--db PATH]
//	lachesis-profiler show    MODEL [--plot FILE.png|FILE.svg] [--db PATH]
//	lachesis-profiler missing [--limit N] [--min-jobs N] [--db PATH]
//	lachesis-profiler status  [--agent-socket PATH]
//	lachesis-profiler publish MODEL (--user NAME | --id ID) [--db PATH]
//	lachesis-profiler jobs    [--limit N] [--db PATH]
//	lachesis-profiler idle    [--below PCT] [--for DURATION] [--db PATH]
//	lachesis-profiler history [--limit N] [--db PATH]
//
// `profile` asks the node agent on this node to sweep COMMAND over CPU
// counts, as you and inside a Slurm job of yours (outside one it submits
// one with srun and runs itself there), and shows a progress bar with an
// ETA; the agent delivers the profile to slurmctld. `list`, `show`, `missing`,
// `jobs` (what each job did with its GPUs, as node agents measured it),
// `idle` (running jobs holding GPUs below a utilisation) and `history`
// (each user's history of each model, which decides whether their next
// one-GPU job of it becomes shards) read the
// controller's SQLite file read-only (run them on the slurmctld host; --db
// defaults to db_path of the lachesis.yaml next to $SLURM_CONF or
// /etc/slurm/slurm.conf). A profile sizes the jobs of the user who made it;
// `publish` (root or SlurmUser) makes one size everyone else's too.
//
// This file and its siblings only wire flags to node-agent/localapi,
// internal/profilestore and profiler.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// errUsage: the command line was wrong; usage has been printed.
var errUsage = errors.New("usage")

const usage = `usage:
  lachesis-profiler profile --model NAME [--regex RE] [--point-seconds N] [--dataset PATH]
                            [--gpus N] [--max-cpus N] [--nvml] [--srun-args OPTS]
                            [--agent-socket PATH] -- COMMAND [ARGS...]
  lachesis-profiler list    [--db PATH]
  lachesis-profiler show    MODEL [--plot FILE.png|FILE.svg] [--db PATH]
  lachesis-profiler missing [--limit N] [--min-jobs N] [--db PATH]
  lachesis-profiler status  [--agent-socket PATH]
  lachesis-profiler publish MODEL (--user NAME | --id ID) [--db PATH]   (root or SlurmUser)
  lachesis-profiler jobs    [--limit N] [--db PATH]
  lachesis-profiler idle    [--below PCT] [--for DURATION] [--db PATH]
  lachesis-profiler history [--limit N] [--db PATH]
Run "lachesis-profiler COMMAND -h" for a command's flags.
`

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "lachesis-profiler:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmds := map[string]func([]string, io.Writer, io.Writer) error{
		"profile": cmdProfile,
		"list":    cmdList,
		"show":    cmdShow,
		"missing": cmdMissing,
		"status":  cmdStatus,
		"publish": cmdPublish,
		"jobs":    cmdJobs,
		"idle":    cmdIdle,
		"history": cmdHistory,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(stdout, usage)
			return nil
		}
		fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
		return errUsage
	}
	return cmd(args[1:], stdout, stderr)
}

// parse parses flags that may come before or after positional arguments
// (`show MODEL --plot x.png`), stopping at "--".
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// flag.Parse consumed a "--" if rest follows one.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lachesis-profiler "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
