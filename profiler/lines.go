package profiler

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"sync"
)

// maxLine caps the length of one output line; the rest of a longer line is
// dropped (a throughput figure is never that far into a line).
const maxLine = 64 << 10

// readLines calls emit with every non-empty line read from r until EOF or
// an error. Lines end at \n or \r: progress bars (tqdm and the like)
// redraw themselves with \r and may never print a \n.
func readLines(r io.Reader, emit func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	flush := func() {
		if len(line) > 0 {
			emit(string(line))
		}
		line = line[:0]
	}
	for {
		chunk, err := br.ReadSlice('\n')
		for len(chunk) > 0 {
			i := bytes.IndexAny(chunk, "\r\n")
			if i < 0 {
				line = appendCapped(line, chunk)
				break
			}
			line = appendCapped(line, chunk[:i])
			flush()
			chunk = chunk[i+1:]
		}
		if err != nil && err != bufio.ErrBufferFull {
			flush()
			return
		}
	}
}

func appendCapped(line, b []byte) []byte {
	return append(line, b[:min(len(b), max(maxLine-len(line), 0))]...)
}

// outputTail keeps the last lines of a workload's output for error
// messages.
type outputTail struct {
	mu    sync.Mutex
	lines []string
}

const (
	tailLines   = 15
	tailLineLen = 200
)

func (t *outputTail) add(line string) {
	if len(line) > tailLineLen {
		line = line[:tailLineLen] + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

// String is the tail as an indented block, or a note that there was none.
func (t *outputTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return "the workload printed nothing"
	}
	return "last lines of its output:\n\t" + strings.Join(t.lines, "\n\t")
}
