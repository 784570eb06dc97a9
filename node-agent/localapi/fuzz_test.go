package localapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// Any local user can write to the agent's socket, so its request decoder
// faces arbitrary bytes: whatever arrives, the real server (with a fake
// handler) answers with one well-formed event line or hangs up, and keeps
// serving the next connection. Seeds: deep JSON nesting, a request at the
// size bound, huge numbers, every op with absurd fields.
func FuzzRequest(f *testing.F) {
	f.Add([]byte(`{"op":"status"}`))
	f.Add([]byte(`{"op":"profile","profile":{"model":"m","point_seconds":1e308,"command":["` + strings.Repeat("x", 1000) + `"]}}`))
	f.Add([]byte(`{"op":"job_end","job_end":{"job_id":4294967295,"end":-1}}`))
	f.Add([]byte(`{"op":"progress","report":{"iterations":18446744073709551615}}`))
	f.Add([]byte(`{"op":"progress","job_id":1,"report":{"iterations":1e400,"job_id":2}}`))
	f.Add([]byte(`{"op":"progress","report":{"iterations":1},"pad":"` + strings.Repeat("x", 4000) + `"}`))
	f.Add([]byte(`{"op":"progress","report":null}{"op":"progress"}`))
	f.Add([]byte(strings.Repeat(`{"op":`, 20000)))
	f.Add(bytes.Repeat([]byte(" "), 1<<20))
	f.Add([]byte{0xff, 0xfe, 0x00})
	path := serve(f, &fakeHandler{})
	f.Fuzz(func(t *testing.T, req []byte) {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatalf("the agent stopped serving: %v", err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		go func() {
			c.Write(req)
			c.(*net.UnixConn).CloseWrite()
		}()
		out, _ := io.ReadAll(c)
		for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			if len(line) > 0 && !json.Valid(line) {
				t.Fatalf("answer %q is not JSON", line)
			}
		}
	})
}
