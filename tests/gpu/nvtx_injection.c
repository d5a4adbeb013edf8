/* A tiny NVTX tool for the tests: NVTX loads it from NVTX_INJECTION64_PATH at its first call.
 * It takes over the core and domain function tables and appends one line per call to the file
 * named by RECFN_NVTX_LOG: "<OS thread id>\t<call>\t<range id>\t<message>". Without
 * RECFN_NVTX_LOG it only answers the calls (for benchmarks). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

static FILE *log_file;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t last_range_id;

static void emit(const char *call, uint64_t id, const char *message) {
    if (!log_file) return;
    pthread_mutex_lock(&lock);
    fprintf(log_file, "%ld\t%s\t%llu\t%s\n", (long)syscall(SYS_gettid), call,
            (unsigned long long)id, message ? message : "");
    fflush(log_file);
    pthread_mutex_unlock(&lock);
}

static const char *message_of(const nvtxEventAttributes_t *attr) {
    if (!attr) return "";
    if (attr->messageType == NVTX_MESSAGE_TYPE_ASCII) return attr->message.ascii;
    /* a registered string's handle is the copy register_string made */
    if (attr->messageType == NVTX_MESSAGE_TYPE_REGISTERED) return (const char *)attr->message.registered;
    return "";
}

static uint64_t new_range_id(void) {
    pthread_mutex_lock(&lock);
    uint64_t id = ++last_range_id;
    pthread_mutex_unlock(&lock);
    return id;
}

/* core module (no domain) */
static void mark_a(const char *m) { emit("mark", 0, m); }
static void mark_ex(const nvtxEventAttributes_t *a) { emit("mark", 0, message_of(a)); }
static int push_a(const char *m) { emit("push", 0, m); return 0; }
static int push_ex(const nvtxEventAttributes_t *a) { emit("push", 0, message_of(a)); return 0; }
static int pop(void) { emit("pop", 0, ""); return 0; }
static nvtxRangeId_t start_a(const char *m) { uint64_t id = new_range_id(); emit("start", id, m); return id; }
static nvtxRangeId_t start_ex(const nvtxEventAttributes_t *a) {
    uint64_t id = new_range_id(); emit("start", id, message_of(a)); return id;
}
static void end(nvtxRangeId_t id) { emit("end", id, ""); }

/* core2 module (domains, registered strings) */
static nvtxDomainHandle_t domain_create(const char *name) {
    emit("domain", 0, name); return (nvtxDomainHandle_t)strdup(name);
}
static void domain_destroy(nvtxDomainHandle_t d) { (void)d; }
static nvtxStringHandle_t register_string(nvtxDomainHandle_t d, const char *s) {
    (void)d; emit("string", 0, s); return (nvtxStringHandle_t)strdup(s);
}
static void d_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { (void)d; mark_ex(a); }
static int d_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { (void)d; return push_ex(a); }
static int d_pop(nvtxDomainHandle_t d) { (void)d; return pop(); }
static nvtxRangeId_t d_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { (void)d; return start_ex(a); }
static void d_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { (void)d; end(id); }

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
    const char *path = getenv("RECFN_NVTX_LOG");
    log_file = path ? fopen(path, "a") : NULL;
    const NvtxExportTableCallbacks *callbacks =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = 0;
    unsigned int size = 0;
    if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) return 0;
    *table[NVTX_CBID_CORE_MarkA] = (NvtxFunctionPointer)mark_a;
    *table[NVTX_CBID_CORE_MarkEx] = (NvtxFunctionPointer)mark_ex;
    *table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)push_a;
    *table[NVTX_CBID_CORE_RangePushEx] = (NvtxFunctionPointer)push_ex;
    *table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)pop;
    *table[NVTX_CBID_CORE_RangeStartA] = (NvtxFunctionPointer)start_a;
    *table[NVTX_CBID_CORE_RangeStartEx] = (NvtxFunctionPointer)start_ex;
    *table[NVTX_CBID_CORE_RangeEnd] = (NvtxFunctionPointer)end;
    if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *table[NVTX_CBID_CORE2_DomainDestroy] = (NvtxFunctionPointer)domain_destroy;
    *table[NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)register_string;
    *table[NVTX_CBID_CORE2_DomainMarkEx] = (NvtxFunctionPointer)d_mark;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)d_push;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)d_pop;
    *table[NVTX_CBID_CORE2_DomainRangeStartEx] = (NvtxFunctionPointer)d_start;
    *table[NVTX_CBID_CORE2_DomainRangeEnd] = (NvtxFunctionPointer)d_end;
    return 1;
}
