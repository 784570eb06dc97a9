package yamlconf

import (
	"bytes"
	"strings"
	"testing"
)

type fuzzTarget struct {
	Name  string  `mapstructure:"name"`
	Count int     `mapstructure:"count"`
	Ratio float64 `mapstructure:"ratio"`
	List  []int   `mapstructure:"list"`
	Inner struct {
		On bool `mapstructure:"on"`
	} `mapstructure:"inner"`
}

// An admin's file is untrusted text: whatever it holds, Decode returns a
// value or an error and never panics; deep nesting, anchors and huge
// documents included (the seeds include a billion-laughs style alias bomb
// and a document at the size bound).
func FuzzDecode(f *testing.F) {
	f.Add([]byte("name: x\ncount: 3\nratio: 0.5\nlist: [1, 2]\ninner: {on: true}\n"))
	f.Add([]byte(strings.Repeat("[", 5000) + strings.Repeat("]", 5000)))
	f.Add([]byte("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"))
	f.Add(bytes.Repeat([]byte("# padding to the size bound\n"), MaxBytes/28))
	f.Add([]byte("count: 1e400\nratio: .nan\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var dst fuzzTarget
		_ = Decode(bytes.NewReader(doc), &dst)
	})
}
