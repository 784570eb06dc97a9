package yamlconf_test

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/yamlconf"
)

type conf struct {
	Name  string `mapstructure:"name"`
	Inner struct {
		Values []float64 `mapstructure:"values"`
		Flag   bool      `mapstructure:"flag"`
	} `mapstructure:"inner"`
}

func defaults() conf {
	var c conf
	c.Name = "default"
	c.Inner.Values = []float64{1, 2, 3}
	return c
}

func TestDecodeKeepsDefaultsOfKeysLeftOut(t *testing.T) {
	c := defaults()
	if err := yamlconf.Decode(strings.NewReader("inner:\n  values: [9]\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Name != "default" || len(c.Inner.Values) != 1 || c.Inner.Values[0] != 9 {
		t.Fatalf("got %+v; want name kept and values replaced by [9]", c)
	}
}

func TestDecodeRejectsBadInput(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       error  // a sentinel, or nil
		mention    string // what the message must name
	}{
		{"unknown top-level key is rejected naming it", "nmae: x\n", nil, "nmae"},
		{"unknown nested key is rejected naming section and key", "inner:\n  flg: true\n", nil, "'inner' has invalid keys: flg"},
		{"wrong type is rejected naming the full key", "inner:\n  values: [1, abc]\n", nil, "inner.values[1]"},
		{"broken YAML is rejected", "inner: [\n", nil, "not valid YAML"},
		{"empty input is refused", "", yamlconf.ErrEmpty, "no key"},
		{"comments-only input is refused", "# name: x\n   \n", yamlconf.ErrEmpty, "no key"},
		{"input over the bound is refused", "name: x\n#" + strings.Repeat("x", yamlconf.MaxBytes), yamlconf.ErrTooLarge, "too large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults()
			err := yamlconf.Decode(strings.NewReader(tc.yaml), &c)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("got %v; want an error (%v) mentioning %q", err, tc.want, tc.mention)
			}
		})
	}
}

// countingReader counts what is read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestDecodeReadsNoMoreThanTheBoundPlusOne(t *testing.T) {
	cr := &countingReader{r: io.LimitReader(hashes{}, 50<<20)}
	c := defaults()
	if err := yamlconf.Decode(cr, &c); !errors.Is(err, yamlconf.ErrTooLarge) {
		t.Fatalf("got %v; want ErrTooLarge", err)
	}
	if cr.n > yamlconf.MaxBytes+1 {
		t.Fatalf("read %d bytes of a 50 MiB stream; want at most %d", cr.n, yamlconf.MaxBytes+1)
	}
}

// hashes is an endless comment.
type hashes struct{}

func (hashes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
	}
	return len(p), nil
}

func TestOpenRefusesAnOversizedFileBeforeReadingIt(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.yaml")
	// A sparse 50 MiB file: refusing it must not depend on its content.
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 50<<20); err != nil {
		t.Fatal(err)
	}
	fh, err := yamlconf.Open(p)
	if err == nil {
		fh.Close()
	}
	if !errors.Is(err, yamlconf.ErrTooLarge) || !strings.Contains(err.Error(), "52428800 bytes") {
		t.Fatalf("got %v; want ErrTooLarge with the size", err)
	}
}

func TestOpenOfAMissingFileIsNotExistWithoutRepeatingThePath(t *testing.T) {
	p := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := yamlconf.Open(p)
	if !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), p) {
		t.Fatalf("got %v; want ErrNotExist without the path", err)
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		name string
		v    float64
		want time.Duration
		ok   bool
	}{
		{"value inside the range converts", 1.5, 1500 * time.Millisecond, true},
		{"bounds are inside the range", 10, 10 * time.Second, true},
		{"value below the range is rejected", 0.5, 0, false},
		{"value above the range is rejected", 11, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := yamlconf.Seconds("k.x", tc.v, 1, 10)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("Seconds(%v) = %v, %v", tc.v, got, err)
			}
			if err != nil && !strings.Contains(err.Error(), "k.x") {
				t.Fatalf("error %q does not name the key", err)
			}
		})
	}
	if _, err := yamlconf.Seconds("k", math.NaN(), 0, 10); err == nil {
		t.Fatal("NaN accepted")
	}
}
