/* collectives._core's C API, for collectives._round (the engine's wait with the GIL released):
 * the submit queue's futex words. Get it with core_api_import() (the GIL held). */
#ifndef RINGSCOPE_CORE_API_H
#define RINGSCOPE_CORE_API_H
#include <Python.h>
#include <stdatomic.h>

#define CORE_API_CAPSULE "collectives._core._C_API"
#define CORE_API_VERSION 1

typedef struct {
    int version;
    /* a SubmitQueue's ``seq`` (bumped by every admission and wake) and ``sleeping`` (set while
     * its engine sleeps on ``seq``: admissions then wake it) words; -1 with TypeError */
    int (*queue_words)(PyObject *queue, atomic_int **seq, atomic_int **sleeping);
} CoreAPI;

static inline const CoreAPI *core_api_import(void) {
    const CoreAPI *api = (const CoreAPI *)PyCapsule_Import(CORE_API_CAPSULE, 0);
    if (api && api->version != CORE_API_VERSION) {
        PyErr_Format(PyExc_ImportError, "collectives._core C API version %d, expected %d",
                     api->version, CORE_API_VERSION);
        return NULL;
    }
    return api;
}

#endif
