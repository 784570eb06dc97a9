package synth

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// openDataset opens path, creating it with size pseudo-random bytes first if
// it does not exist. Random bytes keep a compressing file system from making
// the file's size a lie. Creation goes through a temporary file and a
// rename, so concurrent runs never read a half-written dataset.
func openDataset(path string, size int64) (*os.File, error) {
	f, err := os.Open(path)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create dataset: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	w := bufio.NewWriterSize(tmp, 1<<20)
	src := rand.NewChaCha8([32]byte{'l', 'a', 'c', 'h', 'e', 's', 'i', 's'})
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		n := int(min(left, int64(len(buf))))
		_, _ = src.Read(buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			tmp.Close()
			return nil, fmt.Errorf("write dataset: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write dataset: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write dataset: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("create dataset: %w", err)
	}
	return os.Open(path)
}
