package yamlconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// MaxBytes bounds a config file. The documented lachesis.yaml is about
// 3 KiB; a larger file is a mistake, not a configuration.
const MaxBytes = 1 << 20

var (
	// ErrEmpty: the file sets no key (it is empty, blank or only comments).
	ErrEmpty = errors.New("the file sets no key (it is empty or only comments)")
	// ErrTooLarge: the file is over MaxBytes.
	ErrTooLarge = errors.New("the file is too large")
)

// Open opens the config file at path for Decode. A file over MaxBytes is
// refused from its size alone, before any of it is read. Its errors do
// not repeat the path, which callers put in front of every config error;
// a missing file satisfies errors.Is(err, fs.ErrNotExist).
func Open(path string) (*os.File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, withoutPath(err)
	}
	fi, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, withoutPath(err)
	}
	if fi.Mode().IsRegular() && fi.Size() > MaxBytes {
		fh.Close()
		return nil, fmt.Errorf("%w: %d bytes, at most %d allowed", ErrTooLarge, fi.Size(), MaxBytes)
	}
	return fh, nil
}

func withoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// Decode reads one YAML document of at most MaxBytes from r and decodes it
// onto dst, a pointer to a struct with `mapstructure` tags that already
// holds the defaults: a key the document leaves out keeps its default. A
// key dst has no field for is an error naming it, as is a value that does
// not fit its field. Values are converted as viper converts them (a quoted
// "3" reads as 3), so files that loaded before keep loading.
func Decode(r io.Reader, dst any) error {
	b, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return err
	}
	if len(b) > MaxBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, MaxBytes)
	}
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(b)); err != nil {
		return fmt.Errorf("not valid YAML: %v", err)
	}
	if len(v.AllKeys()) == 0 {
		return ErrEmpty
	}
	err = v.Unmarshal(dst, func(dc *mapstructure.DecoderConfig) {
		dc.ErrorUnused = true // a misspelt key is an error, not a silent default
	})
	if err != nil {
		return errors.New(describe(err))
	}
	return nil
}

// describe turns mapstructure's messages into ones that name the full YAML
// key, e.g. "'tiresias.thresholds[1]' cannot parse value as 'float64'" or
// "'tiresias' has invalid keys: thresold".
func describe(err error) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "decoding failed due to the following error(s):\n\n", "")
	msg = strings.ReplaceAll(msg, "'' has invalid keys: ", "unknown key(s): ")
	return strings.TrimSpace(msg)
}

// Seconds converts v, a YAML number of seconds under key, to a Duration,
// refusing values outside [lo, hi] and NaN (which would otherwise convert
// to an arbitrary Duration).
func Seconds(key string, v, lo, hi float64) (time.Duration, error) {
	if math.IsNaN(v) || v < lo || v > hi {
		return 0, fmt.Errorf("%s must be between %v and %v seconds, got %v", key, lo, hi, v)
	}
	return time.Duration(v * float64(time.Second)), nil
}
