package gpuload

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The PTX is checked here as far as it can be without a driver: its
// header, its entry point's name and parameters (what lcu_launch_spin
// passes), every register declared before use, every branch target
// defined, and every instruction one the kernel is meant to use. The
// driver's JIT is the real assembler; the GPU check runs it.
func TestSpinPTXIsWellFormed(t *testing.T) {
	lines := ptxLines(SpinPTX)
	if len(lines) < 3 || !regexp.MustCompile(`^\.version [1-9]\.[0-9]$`).MatchString(lines[0]) ||
		lines[1] != ".target sm_50" || lines[2] != ".address_size 64" {
		t.Fatalf("header %q: want .version, .target sm_50 (JIT-compiled for any newer GPU), .address_size 64", lines[:min(3, len(lines))])
	}
	body := strings.Join(lines[3:], "\n")
	entry := regexp.MustCompile(`^\.visible \.entry (\w+)\(\s*\.param \.u64 (\w+),\s*\.param \.u32 (\w+)\s*\)\s*\{`).FindStringSubmatch(body)
	if entry == nil || entry[1] != SpinKernel {
		t.Fatalf("want .visible .entry %s(.param .u64 out, .param .u32 iters) {, got %.120q", SpinKernel, body)
	}
	if strings.Count(body, "{") != 1 || strings.Count(body, "}") != 1 || !strings.HasSuffix(body, "}") {
		t.Fatal("want one brace-delimited entry body and nothing after it")
	}
	params := map[string]bool{entry[2]: true, entry[3]: true}

	regs := map[string]int{} // prefix -> count declared
	labels := map[string]int{}
	var branches []string
	sregs := map[string]bool{"%tid.x": true, "%ctaid.x": true, "%ntid.x": true}
	opcodes := map[string]bool{"ld.param.u64": true, "ld.param.u32": true, "mov.u32": true, "mov.f32": true,
		"mad.lo.s32": true, "cvt.rn.f32.u32": true, "setp.eq.u32": true, "setp.ne.u32": true, "bra": true,
		"fma.rn.f32": true, "sub.u32": true, "cvta.to.global.u64": true, "mul.wide.u32": true, "add.s64": true,
		"st.global.f32": true, "ret": true}
	used := map[string]bool{}
	inBody := false
	for _, l := range lines[3:] {
		switch {
		case l == "{":
			inBody = true
			continue
		case !inBody || l == "}":
			continue
		}
		if m := regexp.MustCompile(`^\.reg \.(pred|b32|f32|b64) (%[a-z]+)<([0-9]+)>;$`).FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[3])
			if _, dup := regs[m[2]]; dup {
				t.Fatalf("register %s declared twice", m[2])
			}
			regs[m[2]] = n
			continue
		}
		if strings.HasSuffix(l, ":") {
			labels[strings.TrimSuffix(l, ":")]++
			continue
		}
		if !strings.HasSuffix(l, ";") {
			t.Fatalf("instruction without ';': %q", l)
		}
		ins := strings.TrimSuffix(l, ";")
		if strings.HasPrefix(ins, "@") { // predicated
			f := strings.Fields(ins)
			if !regexp.MustCompile(`^@%p[0-9]+$`).MatchString(f[0]) {
				t.Fatalf("bad predicate in %q", l)
			}
			checkReg(t, regs, strings.TrimPrefix(f[0], "@"), l)
			ins = strings.Join(f[1:], " ")
		}
		f := strings.Fields(ins)
		op := f[0]
		if !opcodes[op] {
			t.Fatalf("unexpected opcode %q in %q", op, l)
		}
		used[op] = true
		switch op {
		case "bra":
			branches = append(branches, f[1])
			continue
		case "ret":
			if len(f) != 1 {
				t.Fatalf("ret with operands: %q", l)
			}
			continue
		}
		for _, arg := range strings.Split(strings.Join(f[1:], " "), ",") {
			arg = strings.Trim(strings.TrimSpace(arg), "[]")
			switch {
			case arg == "":
				t.Fatalf("empty operand in %q", l)
			case sregs[arg]:
			case strings.HasPrefix(arg, "%"):
				checkReg(t, regs, arg, l)
			case params[arg]:
			case regexp.MustCompile(`^(0f[0-9A-F]{8}|[0-9]+)$`).MatchString(arg):
			default:
				t.Fatalf("operand %q of %q is neither a register, a parameter nor a constant", arg, l)
			}
		}
	}
	for _, b := range branches {
		if labels[b] != 1 {
			t.Fatalf("branch to %s: defined %d times", b, labels[b])
		}
	}
	for _, op := range []string{"fma.rn.f32", "st.global.f32", "ret"} {
		if !used[op] {
			t.Fatalf("the kernel never uses %s: no compute loop or no result stored", op)
		}
	}
}

// ptxLines is the PTX without comments and blank lines, trimmed.
func ptxLines(src string) []string {
	var out []string
	for _, l := range strings.Split(src, "\n") {
		if i := strings.Index(l, "//"); i >= 0 {
			l = l[:i]
		}
		l = strings.TrimSpace(strings.Join(strings.Fields(l), " "))
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func checkReg(t *testing.T, regs map[string]int, r, line string) {
	t.Helper()
	m := regexp.MustCompile(`^(%[a-z]+)([0-9]+)$`).FindStringSubmatch(r)
	if m == nil {
		t.Fatalf("bad register %q in %q", r, line)
	}
	n, _ := strconv.Atoi(m[2])
	if decl, ok := regs[m[1]]; !ok || n >= decl {
		t.Fatalf("register %s in %q is not declared (%s<%d>)", r, line, m[1], decl)
	}
}

func TestGridKeepsEveryBlockResident(t *testing.T) {
	for _, tc := range []struct {
		sms  int
		want uint32
	}{{132, 264}, {108, 216}, {0, 2}} {
		if got := GridFor(tc.sms); got != tc.want {
			t.Errorf("GridFor(%d) = %d, want %d", tc.sms, got, tc.want)
		}
	}
}
