package configerr

import (
	"errors"
	"fmt"
	"testing"
)

func TestKeyErrorNamesItsKeyAndWrapsItsSection(t *testing.T) {
	tiresias, synergy := errors.New("invalid tiresias config"), errors.New("invalid synergy config")
	err := fmt.Errorf("reload: %w", errors.Join(New(tiresias, "thresholds", "must ascend, got %v", []int{2, 1})))
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "thresholds" || ke.Msg != "must ascend, got [2 1]" {
		t.Fatalf("errors.As(%v) = %+v", err, ke)
	}
	if ke.Error() != "thresholds: must ascend, got [2 1]" {
		t.Errorf("Error() = %q", ke.Error())
	}
	if !errors.Is(err, tiresias) || errors.Is(err, synergy) {
		t.Errorf("errors.Is: tiresias %v, synergy %v; want true, false", errors.Is(err, tiresias), errors.Is(err, synergy))
	}
}
