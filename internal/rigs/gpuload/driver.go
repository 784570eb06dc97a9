package gpuload

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// The few CUDA driver API types and prototypes the loader uses, declared
// here so that it builds without CUDA headers; their ABI is stable since
// CUDA 4 (the _v2 entry points since CUDA 3.2).
typedef int lcu_result;
typedef int lcu_device;
typedef void *lcu_context;
typedef void *lcu_module;
typedef void *lcu_function;
typedef unsigned long long lcu_deviceptr;

typedef struct {
	void *handle;
	lcu_result (*init)(unsigned int);
	lcu_result (*driver_version)(int *);
	lcu_result (*device_count)(int *);
	lcu_result (*device_get)(lcu_device *, int);
	lcu_result (*device_name)(char *, int, lcu_device);
	lcu_result (*device_attribute)(int *, int, lcu_device);
	lcu_result (*primary_retain)(lcu_context *, lcu_device);
	lcu_result (*ctx_set_current)(lcu_context);
	lcu_result (*mem_alloc)(lcu_deviceptr *, size_t);
	lcu_result (*memset_d8)(lcu_deviceptr, unsigned char, size_t);
	lcu_result (*module_load)(lcu_module *, const void *, unsigned int, int *, void **);
	lcu_result (*module_function)(lcu_function *, lcu_module, const char *);
	lcu_result (*launch)(lcu_function, unsigned int, unsigned int, unsigned int,
		unsigned int, unsigned int, unsigned int, unsigned int, void *, void **, void **);
	lcu_result (*synchronize)(void);
	lcu_result (*error_name)(lcu_result, const char **);
	lcu_result (*error_string)(lcu_result, const char **);
} lcu_api;

// lcu_open loads the library at path and resolves every entry point; on
// failure it returns NULL with *missing naming the first symbol not found,
// or, when the library itself could not be loaded, dlerror's message in
// err (read here: dlerror is per thread, and the next cgo call may run on
// another).
static lcu_api *lcu_open(const char *path, const char **missing, char *err, size_t errlen) {
	*missing = NULL;
	err[0] = 0;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "unknown dlopen error");
		return NULL;
	}
	lcu_api *a = calloc(1, sizeof *a);
	if (a == NULL) {
		dlclose(h);
		*missing = "(out of memory)";
		return NULL;
	}
	a->handle = h;
#define LCU_SYM(field, name) \
	if ((*(void **)&a->field = dlsym(h, name)) == NULL) { *missing = name; goto fail; }
	LCU_SYM(init, "cuInit")
	LCU_SYM(driver_version, "cuDriverGetVersion")
	LCU_SYM(device_count, "cuDeviceGetCount")
	LCU_SYM(device_get, "cuDeviceGet")
	LCU_SYM(device_name, "cuDeviceGetName")
	LCU_SYM(device_attribute, "cuDeviceGetAttribute")
	LCU_SYM(primary_retain, "cuDevicePrimaryCtxRetain")
	LCU_SYM(ctx_set_current, "cuCtxSetCurrent")
	LCU_SYM(mem_alloc, "cuMemAlloc_v2")
	LCU_SYM(memset_d8, "cuMemsetD8_v2")
	LCU_SYM(module_load, "cuModuleLoadDataEx")
	LCU_SYM(module_function, "cuModuleGetFunction")
	LCU_SYM(launch, "cuLaunchKernel")
	LCU_SYM(synchronize, "cuCtxSynchronize")
	LCU_SYM(error_name, "cuGetErrorName")
	LCU_SYM(error_string, "cuGetErrorString")
#undef LCU_SYM
	return a;
fail:
	dlclose(h);
	free(a);
	return NULL;
}

static lcu_result lcu_init(lcu_api *a) { return a->init(0); }
static lcu_result lcu_driver_version(lcu_api *a, int *v) { return a->driver_version(v); }
static lcu_result lcu_device_count(lcu_api *a, int *n) { return a->device_count(n); }
static lcu_result lcu_device_get(lcu_api *a, lcu_device *d, int i) { return a->device_get(d, i); }
static lcu_result lcu_device_name(lcu_api *a, char *buf, int n, lcu_device d) { return a->device_name(buf, n, d); }
static lcu_result lcu_device_attribute(lcu_api *a, int *v, int attr, lcu_device d) { return a->device_attribute(v, attr, d); }
static lcu_result lcu_primary_retain(lcu_api *a, lcu_context *c, lcu_device d) { return a->primary_retain(c, d); }
static lcu_result lcu_ctx_set_current(lcu_api *a, lcu_context c) { return a->ctx_set_current(c); }
static lcu_result lcu_mem_alloc(lcu_api *a, lcu_deviceptr *p, size_t n) { return a->mem_alloc(p, n); }
static lcu_result lcu_memset_d8(lcu_api *a, lcu_deviceptr p, unsigned char v, size_t n) { return a->memset_d8(p, v, n); }
static lcu_result lcu_synchronize(lcu_api *a) { return a->synchronize(); }
static lcu_result lcu_module_function(lcu_api *a, lcu_function *f, lcu_module m, const char *name) {
	return a->module_function(f, m, name);
}

// lcu_module_load JIT-compiles the PTX image, keeping the compiler's error
// log (CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6).
static lcu_result lcu_module_load(lcu_api *a, lcu_module *m, const char *ptx, char *log, size_t log_size) {
	int opts[2] = {5, 6};
	void *vals[2] = {log, (void *)(uintptr_t)log_size};
	return a->module_load(m, ptx, 2, opts, vals);
}

// lcu_launch_spin launches lachesis_spin(out, iters) on the default stream.
static lcu_result lcu_launch_spin(lcu_api *a, lcu_function f, unsigned int grid, unsigned int block,
		lcu_deviceptr out, unsigned int iters) {
	void *params[2] = {&out, &iters};
	return a->launch(f, grid, 1, 1, block, 1, 1, 0, NULL, params, NULL);
}

static const char *lcu_error_name(lcu_api *a, lcu_result r) {
	const char *s = NULL;
	if (a->error_name(r, &s) != 0 || s == NULL) return "CUDA_ERROR_UNKNOWN";
	return s;
}

static const char *lcu_error_string(lcu_api *a, lcu_result r) {
	const char *s = NULL;
	if (a->error_string(r, &s) != 0 || s == NULL) return "unknown error";
	return s;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// DefaultLibrary is the CUDA driver library's soname; the NVIDIA driver
// installs it (the CUDA toolkit is not needed).
const DefaultLibrary = "libcuda.so.1"

// ErrNoDriver: the CUDA driver library could not be loaded.
var ErrNoDriver = errors.New("the CUDA driver library could not be loaded (is the NVIDIA driver installed?)")

// CUDA's device attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT.
const attrMultiprocessors = 16

// Driver is the CUDA driver API reached through dlopen.
type Driver struct {
	api *C.lcu_api
}

// OpenDriver loads the CUDA driver library (DefaultLibrary when path is
// empty) and resolves the entry points the loader uses. It does not
// initialise CUDA: Open does.
func OpenDriver(path string) (*Driver, error) {
	if path == "" {
		path = DefaultLibrary
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var missing *C.char
	var why [512]C.char
	api := C.lcu_open(cpath, &missing, &why[0], C.size_t(len(why)))
	if api == nil {
		if missing != nil {
			return nil, fmt.Errorf("%s lacks %s: not the CUDA driver library", path, C.GoString(missing))
		}
		// dlerror names the path itself.
		return nil, fmt.Errorf("%w: %s", ErrNoDriver, C.GoString(&why[0]))
	}
	return &Driver{api: api}, nil
}

// cudaError names a failed driver call with CUDA's own name and message.
func (d *Driver) cudaError(what string, r C.lcu_result) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (%d): %s", what, C.GoString(C.lcu_error_name(d.api, r)), int(r),
		C.GoString(C.lcu_error_string(d.api, r)))
}

// GPU is one GPU with a context current on the calling OS thread, the spin
// kernel loaded and its output buffer allocated. Every method must be
// called from that thread: Open locks the calling goroutine to it.
type GPU struct {
	d      *Driver
	fn     C.lcu_function
	out    C.lcu_deviceptr
	grid   uint32
	block  uint32
	Name   string
	SMs    int
	Driver int // CUDA driver version, e.g. 13000
}

var _ Device = (*GPU)(nil)

// Open initialises CUDA, makes GPU index's primary context current on
// this goroutine's OS thread (locked to it for good: CUDA contexts are
// per thread) and loads the spin kernel, JIT-compiled from its PTX.
func (d *Driver) Open(index int) (*GPU, error) {
	runtime.LockOSThread()
	if err := d.cudaError("cuInit", C.lcu_init(d.api)); err != nil {
		return nil, err
	}
	g := &GPU{d: d, block: spinBlock}
	var v C.int
	if err := d.cudaError("cuDriverGetVersion", C.lcu_driver_version(d.api, &v)); err != nil {
		return nil, err
	}
	g.Driver = int(v)
	var n C.int
	if err := d.cudaError("cuDeviceGetCount", C.lcu_device_count(d.api, &n)); err != nil {
		return nil, err
	}
	if index < 0 || index >= int(n) {
		return nil, fmt.Errorf("GPU %d: the driver sees %d GPU(s)", index, int(n))
	}
	var dev C.lcu_device
	if err := d.cudaError("cuDeviceGet", C.lcu_device_get(d.api, &dev, C.int(index))); err != nil {
		return nil, err
	}
	var name [256]C.char
	if err := d.cudaError("cuDeviceGetName", C.lcu_device_name(d.api, &name[0], C.int(len(name)), dev)); err != nil {
		return nil, err
	}
	g.Name = C.GoString(&name[0])
	var sms C.int
	if err := d.cudaError("cuDeviceGetAttribute(multiprocessors)", C.lcu_device_attribute(d.api, &sms, attrMultiprocessors, dev)); err != nil {
		return nil, err
	}
	g.SMs = int(sms)
	g.grid = GridFor(g.SMs)
	var ctx C.lcu_context
	if err := d.cudaError("cuDevicePrimaryCtxRetain", C.lcu_primary_retain(d.api, &ctx, dev)); err != nil {
		return nil, err
	}
	if err := d.cudaError("cuCtxSetCurrent", C.lcu_ctx_set_current(d.api, ctx)); err != nil {
		return nil, err
	}
	ptx := C.CString(SpinPTX)
	defer C.free(unsafe.Pointer(ptx))
	const logSize = 8 << 10
	jitLog := (*C.char)(C.calloc(logSize, 1))
	defer C.free(unsafe.Pointer(jitLog))
	var mod C.lcu_module
	if r := C.lcu_module_load(d.api, &mod, ptx, jitLog, logSize); r != 0 {
		return nil, fmt.Errorf("%w (JIT log: %q)", d.cudaError("cuModuleLoadDataEx(spin PTX)", r), C.GoString(jitLog))
	}
	kname := C.CString(SpinKernel)
	defer C.free(unsafe.Pointer(kname))
	if err := d.cudaError("cuModuleGetFunction("+SpinKernel+")", C.lcu_module_function(d.api, &g.fn, mod, kname)); err != nil {
		return nil, err
	}
	outBytes := C.size_t(g.grid) * C.size_t(g.block) * 4
	if err := d.cudaError("cuMemAlloc(spin output)", C.lcu_mem_alloc(d.api, &g.out, outBytes)); err != nil {
		return nil, err
	}
	return g, nil
}

// Hold allocates mib MiB of device memory and writes every byte of it, so
// the driver has really committed it. It is held until the process ends.
func (g *GPU) Hold(mib int) error {
	if mib <= 0 {
		return nil
	}
	n := C.size_t(mib) << 20
	var p C.lcu_deviceptr
	if err := g.d.cudaError(fmt.Sprintf("cuMemAlloc(%d MiB)", mib), C.lcu_mem_alloc(g.d.api, &p, n)); err != nil {
		return err
	}
	if err := g.d.cudaError("cuMemsetD8", C.lcu_memset_d8(g.d.api, p, 0x5a, n)); err != nil {
		return err
	}
	return g.Sync()
}

// Launch implements Device: one spin kernel of iters rounds, queued.
func (g *GPU) Launch(iters uint32) error {
	return g.d.cudaError("cuLaunchKernel("+SpinKernel+")",
		C.lcu_launch_spin(g.d.api, g.fn, C.uint(g.grid), C.uint(g.block), g.out, C.uint(iters)))
}

// Sync implements Device: waits for every queued kernel.
func (g *GPU) Sync() error {
	return g.d.cudaError("cuCtxSynchronize", C.lcu_synchronize(g.d.api))
}
