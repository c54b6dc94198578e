/* tracer._record's C API, for other extensions (collectives._core): the recorder contract's hot
 * calls without a Python frame. Get it once with record_api_import() (the GIL held); every call
 * needs the GIL too. A recorder that is not a plain tracer._record.Core (the NullRecorder, an NVTX
 * recorder whose spans are Python) is served through its Python methods, so callers need not care.
 */
#ifndef RINGSCOPE_RECORD_API_H
#define RINGSCOPE_RECORD_API_H
#include <Python.h>

#define RECORD_API_CAPSULE "tracer._record._C_API"
#define RECORD_API_VERSION 1

typedef struct {
    int version;
    /* the process-wide recorder (tracer.get_recorder()), borrowed */
    PyObject *(*current)(void);
    /* rec.enabled (0 for a closed recorder); -1 with an exception set */
    int (*enabled)(PyObject *rec);
    /* rec.step */
    long long (*step)(PyObject *rec);
    /* rec.now(): time.perf_counter_ns() */
    long long (*now)(void);
    /* an X span from t0 to t1 on tid, recorded at ``step`` (rec.complete, or begin/end through
     * Python for a recorder whose spans are Python); 0, or -1 with an exception set */
    int (*complete)(PyObject *rec, int tid, PyObject *name, PyObject *cat, PyObject *args,
                    long long t0, long long t1, long long step);
    /* rec.ops_done(ops, t_done_ns, error): a new reference to the ops another recorder stamped
     * (a list, or None), NULL with an exception set */
    PyObject *(*ops_done)(PyObject *rec, PyObject *ops, long long t_done, PyObject *error);
} RecordAPI;

static inline const RecordAPI *record_api_import(void) {
    const RecordAPI *api = (const RecordAPI *)PyCapsule_Import(RECORD_API_CAPSULE, 0);
    if (api && api->version != RECORD_API_VERSION) {
        PyErr_Format(PyExc_ImportError, "tracer._record C API version %d, expected %d",
                     api->version, RECORD_API_VERSION);
        return NULL;
    }
    return api;
}

#endif
