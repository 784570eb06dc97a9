package sim

import (
	"fmt"
	"sync"
)

// Variant is one simulation of a comparison: a policy, an allocation mode
// and a label for reports.
type Variant struct {
	Label  string
	Config Config
}

// Variants is the cross product of policies and allocation modes on top of
// base, labelled "policy" or, with several modes, "policy/alloc".
func Variants(base Config, policies []string, allocs []AllocMode) []Variant {
	var out []Variant
	for _, a := range allocs {
		for _, p := range policies {
			c := base
			c.Policy, c.Alloc = p, a
			label := p
			if len(allocs) > 1 {
				label = fmt.Sprintf("%s/%s", p, a)
			}
			out = append(out, Variant{Label: label, Config: c})
		}
	}
	return out
}

// FairShareVariants follows each las and gittins variant with a copy that
// has fair share between accounts on, labelled LABEL+fs.
func FairShareVariants(variants []Variant) []Variant {
	var out []Variant
	for _, v := range variants {
		out = append(out, v)
		if v.Config.Policy != PolicyLAS && v.Config.Policy != PolicyGittins {
			continue
		}
		fs := v
		fs.Label += "+fs"
		fs.Config.PolicyOptions.Tiresias.FairShare.Enabled = true
		out = append(out, fs)
	}
	return out
}

// RunAll simulates every variant on the same trace, up to parallel at a
// time (each simulation is single-threaded and independent, so results do
// not depend on parallel). Results are in the order of variants.
func RunAll(trace *Trace, variants []Variant, parallel int) ([]*Result, error) {
	parallel = max(parallel, 1)
	results := make([]*Result, len(variants))
	errs := make([]error, len(variants))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range variants {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := Run(variants[i].Config, trace)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", variants[i].Label, err)
				return
			}
			r.Label = variants[i].Label
			results[i] = r
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}
