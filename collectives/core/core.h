/* collectives._core: the engine's native core (shared declarations).
 *
 * One file per job, as Horovod's common/ has them: entry.c (one submitted op), prepare.c (the
 * submit-time fill of a host array's allreduce), handle.c (an op's pending result and its
 * completion), submit_queue.c (admission, the submit queue, the ops in flight, completion),
 * fusion_buffer.c (the packing plan of a fused response on the host), bit_words.c (the bit
 * rounds' words), response_cache.c (the cache's table: the lookup and the plan of fused
 * responses), module.c (the module, the tracer's C API, the vocabulary). A thread that waits (a
 * user's thread on a handle, the engine for work) sleeps on a futex with the GIL released.
 */
#ifndef RINGSCOPE_CORE_H
#define RINGSCOPE_CORE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>
#include "record_api.h"
#include "futex.h"
#include "core_api.h"

/* the tracer's C API and the vocabulary the core records with (tracer/vocab.py), set at import */
extern const RecordAPI *rs_rec;
extern PyObject *rs_SYNCHRONIZE, *rs_CAT_FRAMEWORK, *rs_ARG_TENSOR, *rs_ARG_STEP;
extern int rs_TID_FRAMEWORK;
/* interned attribute names: an Entry's stamp (read back from a list of ops), a Handle's splits */
extern PyObject *rs_s_stamp, *rs_s_received_splits;
/* collectives.handles.CollectiveError (set by collectives.handles) */
extern PyObject *rs_CollectiveError;

/* entry.c: one submitted op (collectives.entry.Entry) */
typedef struct {
    PyObject_HEAD
    PyObject *name, *op_type, *tensor, *adapter, *reduce_op, *prescale, *postscale, *root,
        *splits, *process_set, *output, *backend, *priority, *group, *group_size, *handle,
        *submit_ns, *nbytes, *dtype, *shape, *device, *meta, *stamp, *trace_key;
} RsEntry;
extern PyTypeObject rs_EntryType;
int rs_entry_setup(void);

/* prepare.c: the submit-time fill of a host array's allreduce */
int rs_prepare_init(void);
int rs_prepare_entry(PyObject *e, PyObject *default_backend);   /* 1 filled, 0 not, -1 error */
PyObject *rs_prepare_setup(PyObject *m, PyObject *const *a, Py_ssize_t n);
PyObject *rs_prepare_allreduce(PyObject *m, PyObject *const *a, Py_ssize_t n);

/* handle.c */
extern PyTypeObject rs_HandleType;
PyObject *rs_handle_new(PyObject *name);
int rs_handle_finish(PyObject *handle, PyObject *result, PyObject *error);   /* -1 on error */

/* submit_queue.c */
extern PyTypeObject rs_SubmitQueueType;
PyObject *rs_stamped(PyObject *m, PyObject *a);
PyObject *rs_unstamp(PyObject *m, PyObject *a);
int rs_queue_words(PyObject *queue, atomic_int **seq, atomic_int **sleeping);

/* fusion_buffer.c: the packing plan of a fused response on the host */
PyObject *rs_pack(PyObject *m, PyObject *const *a, Py_ssize_t n);
PyObject *rs_unpack(PyObject *m, PyObject *const *a, Py_ssize_t n);

/* response_cache.c: the response cache's table, the lookup (route) and the plan of fused responses */
extern PyTypeObject rs_CacheTableType;
int rs_cache_init(void);
PyObject *rs_route(PyObject *m, PyObject *const *a, Py_ssize_t n);

/* bit_words.c: the bit rounds' words */
PyObject *rs_put_bits(PyObject *m, PyObject *const *a, Py_ssize_t n);
PyObject *rs_bits_of(PyObject *m, PyObject *const *a, Py_ssize_t n);

#endif
