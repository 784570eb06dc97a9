package gpushare

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// The pair table (sharing.Table) in slurmctld: seeded at start from
// Gavel's measurements in sharing.pair_table, then what introspection
// measured and marked bad, each by the users whose jobs it measured
// (sharing.Party: applied to their jobs, to everyone's only with
// sharing.pair_quorum, for sharing.pair_mark_ttl); the bad pairs are kept
// in the ledger (bad_pair_marks, with their users and time), so a restart
// remembers them.

// maxGavelFile bounds each of the pair table's seed files (Gavel's are
// 20 and 110 KB).
const maxGavelFile = 8 << 20

// seedPairTable fills the pair table from Gavel's two files in
// sharing.pair_table, on sharing.pair_table_gpu's rows, at start, when the
// opportunistic class is on (the table steers nothing else). Any
// problem (missing, not a regular file, too large, refused by
// sharing.ReadGavel) is logged and leaves the table empty: introspection
// then learns each pair by trying it. Bad pairs the ledger remembers are
// marked after (restoreBadPairs).
func (c *Sharing) seedPairTable() {
	dir, gpu := c.cfg.Sharing.PairTable, c.cfg.Sharing.PairTableGPU
	if dir == "" || c.cfg.Sharing.OpportunisticPartition == "" {
		return // no seeds, or no opportunistic class to steer
	}
	files := [2]io.Reader{}
	for i, name := range []string{"throughputs.csv", "colocated.csv"} {
		f, err := openRegular(filepath.Join(dir, name))
		if err != nil {
			c.log.Error("pair table not seeded: its file cannot be read; it starts empty", keyPath, filepath.Join(dir, name), keyErr, err)
			return
		}
		defer f.Close()
		files[i] = &capReader{r: f, left: maxGavelFile}
	}
	t, err := sharing.ReadGavel(files[0], files[1], gpu, c.intro.limits)
	if err != nil {
		c.log.Error("pair table not seeded: its files were refused; it starts empty", keyPath, dir, "gpu_type", gpu, keyErr, err)
		return
	}
	c.mu.Lock()
	c.intro.table = t
	c.mu.Unlock()
	c.log.Info("pair table seeded from Gavel's measurements", keyPath, dir, "gpu_type", gpu, "pairs", t.Len())
}

// openRegular opens a regular file without following a FIFO or a device
// into a blocking read (O_NONBLOCK only matters for those).
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("not a regular file")
		}
		return nil, err
	}
	return f, nil
}

// capReader fails once more than left bytes were read.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("%w: file over %d bytes", sharing.ErrBadEntry, maxGavelFile)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// flushBadPairs saves the bad pairs marked since the last flush; a failed
// save keeps them for the next one. Writer goroutine only.
func (c *Sharing) flushBadPairs(store ledger.BadPairStore) {
	c.mu.Lock()
	pairs := c.intro.unsaved
	c.intro.unsaved = nil
	c.mu.Unlock()
	if len(pairs) == 0 {
		return
	}
	if err := store.SaveBadPairs(pairs); err != nil {
		c.log.Error("saving bad pairs failed; retrying with the next flush", keyErr, err)
		c.mu.Lock()
		if room := ledger.MaxBadPairs - len(c.intro.unsaved); room > 0 {
			c.intro.unsaved = append(c.intro.unsaved, pairs[:min(len(pairs), room)]...)
		}
		c.mu.Unlock()
	}
}

// restoreBadPairs marks the pairs the ledger remembers as bad, each for
// the users who measured it, at the time it was marked (so it expires
// sharing.pair_mark_ttl after, as it would have without the restart). The
// ledger is a file, hostile too: a name the table refuses, a row without
// users or not a uid, and a mark already expired are skipped; a time in
// the future counts as now.
func (c *Sharing) restoreBadPairs(store ledger.BadPairStore, now int64) error {
	pairs, err := store.BadPairs()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.intro.init()
	for _, p := range pairs {
		hu, herr := strconv.ParseUint(p.HostUser, 10, 32)
		gu, gerr := strconv.ParseUint(p.GuestUser, 10, 32)
		at := min(p.At, now)
		if herr != nil || gerr != nil || now-at >= c.intro.limits.MarkTTL {
			continue
		}
		_ = c.intro.table.MarkBadBy(party(uint32(hu), uint32(gu)), at, p.Host, p.Guest)
	}
	return nil
}

// PairBad says whether the pair of models is bad for a host of user
// hostUID beside a guest of user guestUID now.
func (c *Sharing) PairBad(host, guest string, hostUID, guestUID uint32, now int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.intro.init()
	return c.intro.table.For(party(hostUID, guestUID), now).Bad(host, guest)
}

// pairLimits are the pair table's bounds for cfg: sharing's defaults
// with sharing.pair_quorum and sharing.pair_mark_ttl (0 takes the
// default).
func pairLimits(cfg config.Config) sharing.Limits {
	l := sharing.DefaultLimits()
	if cfg.Sharing.PairQuorum > 0 {
		l.Quorum = cfg.Sharing.PairQuorum
	}
	if cfg.Sharing.PairMarkTTL > 0 {
		l.MarkTTL = cfg.Sharing.PairMarkTTL
	}
	return l
}
