/* tracer._fusion_rules's C API, for collectives._core: the fusion plan (tracer/fusion_rules.py has
 * the rule in words) as one C function that the runtime's core calls directly and the Python
 * wrappers (tracer.fusion_rules.by_priority and fuse, so the coordinator and the what-if replay)
 * call through tracer._fusion_rules.plan. Get it once with fusion_api_import() (the GIL held); the
 * plan itself touches no Python object and may run without the GIL.
 */
#ifndef RINGSCOPE_FUSION_API_H
#define RINGSCOPE_FUSION_API_H
#include <Python.h>
#include <stdint.h>

#define FUSION_API_CAPSULE "tracer._fusion_rules._C_API"
#define FUSION_API_VERSION 1

typedef struct {
    int64_t key;        /* units fuse only with equal keys; < 0: never fused */
    int64_t nbytes;
    int64_t priority;   /* higher first; readiness (index) order among equals */
} FuseUnit;

typedef struct {
    int version;
    /* The plan of ``n`` units under ``threshold`` bytes (0: no fusion): ``order`` gets the unit
     * indices batch after batch, ``starts`` each batch's first position in ``order`` (both hold
     * ``n``); returns the number of batches, or -1 when out of memory (no exception set). */
    Py_ssize_t (*plan)(const FuseUnit *units, Py_ssize_t n, int64_t threshold, Py_ssize_t *order,
                       Py_ssize_t *starts);
} FusionAPI;

static inline const FusionAPI *fusion_api_import(void) {
    PyObject *mod = PyImport_ImportModule("tracer._fusion_rules");   /* (the capsule's lookup
                                                                         imports only the package) */
    if (!mod) return NULL;
    Py_DECREF(mod);
    const FusionAPI *api = (const FusionAPI *)PyCapsule_Import(FUSION_API_CAPSULE, 0);
    if (api && api->version != FUSION_API_VERSION) {
        PyErr_Format(PyExc_ImportError, "tracer._fusion_rules C API version %d, expected %d",
                     api->version, FUSION_API_VERSION);
        return NULL;
    }
    return api;
}

#endif
