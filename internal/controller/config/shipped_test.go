package config

import (
	"os"
	"reflect"
	"testing"
)

// The example in etc/ documents the defaults; it must not drift from them.
func TestShippedExampleEqualsDefaults(t *testing.T) {
	f, err := os.Open("../../../etc/lachesis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Fatalf("etc/lachesis.yaml gives\n%+v\nbut the defaults are\n%+v", got, want)
	}
}
