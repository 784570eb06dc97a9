//go:build cgo

package munge

/*
#cgo LDFLAGS: -lmunge
#include <stdlib.h>
#include <munge.h>

// munge_ctx_set is variadic, which cgo cannot call.
static munge_err_t lachesis_munge_set_socket(munge_ctx_t ctx, const char *path) {
	return munge_ctx_set(ctx, MUNGE_OPT_SOCKET, path);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// newContext makes a munge context for socket; the caller destroys it.
func newContext(socket string) (C.munge_ctx_t, error) {
	ctx := C.munge_ctx_create()
	if ctx == nil {
		return nil, fmt.Errorf("%w: munge_ctx_create failed", ErrMunge)
	}
	if socket != "" {
		cs := C.CString(socket)
		defer C.free(unsafe.Pointer(cs))
		if rc := C.lachesis_munge_set_socket(ctx, cs); rc != C.EMUNGE_SUCCESS {
			err := mapError(rc, ctx)
			C.munge_ctx_destroy(ctx)
			return nil, err
		}
	}
	return ctx, nil
}

// Encode asks the munged at socket for a credential over payload.
func Encode(socket string, payload []byte) (string, error) {
	ctx, err := newContext(socket)
	if err != nil {
		return "", err
	}
	defer C.munge_ctx_destroy(ctx)
	var buf unsafe.Pointer
	if len(payload) > 0 {
		buf = C.CBytes(payload)
		defer C.free(buf)
	}
	var cred *C.char
	if rc := C.munge_encode(&cred, ctx, buf, C.int(len(payload))); rc != C.EMUNGE_SUCCESS {
		return "", mapError(rc, ctx)
	}
	defer C.free(unsafe.Pointer(cred))
	return C.GoString(cred), nil
}

// Decode asks the munged at socket to check cred. It returns the payload
// and the uid/gid of the credential's creator.
func Decode(socket, cred string) (payload []byte, uid, gid uint32, err error) {
	if cred == "" {
		return nil, 0, 0, fmt.Errorf("%w: %w: empty credential", ErrMunge, ErrInvalid)
	}
	ctx, err := newContext(socket)
	if err != nil {
		return nil, 0, 0, err
	}
	defer C.munge_ctx_destroy(ctx)
	ccred := C.CString(cred)
	defer C.free(unsafe.Pointer(ccred))
	var (
		buf  unsafe.Pointer
		n    C.int
		cuid C.uid_t
		cgid C.gid_t
	)
	rc := C.munge_decode(ccred, ctx, &buf, &n, &cuid, &cgid)
	// For some refusals libmunge still hands back the payload; free it.
	if buf != nil {
		defer C.free(buf)
	}
	if rc != C.EMUNGE_SUCCESS {
		return nil, 0, 0, mapError(rc, ctx)
	}
	if buf != nil && n > 0 {
		payload = C.GoBytes(buf, n)
	}
	return payload, uint32(cuid), uint32(cgid), nil
}

// mapError turns a munge error code into this package's sentinels, keeping
// libmunge's own (more detailed) message.
func mapError(rc C.munge_err_t, ctx C.munge_ctx_t) error {
	msg := ""
	if ctx != nil {
		if s := C.munge_ctx_strerror(ctx); s != nil {
			msg = C.GoString(s)
		}
	}
	if msg == "" {
		msg = C.GoString(C.munge_strerror(rc))
	}
	return codeError(int(rc), msg)
}
