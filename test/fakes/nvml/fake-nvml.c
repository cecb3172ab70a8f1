/*
 * A stand-in for libnvidia-ml.so.1 on machines without NVIDIA GPUs.
 *
 * It exports the real NVML symbols (the versioned ones a loader calls when the header's
 * macros are not there: nvmlInit_v2, nvmlDeviceGetCount_v2, ...GetComputeRunningProcesses_v3)
 * with the real signatures and struct layouts of nvml.h, so the production FFI bindings
 * run against it unchanged. What it reports comes from a scenario file named by
 * FAKE_NVML_SCENARIO, read at nvmlInit_v2 (see scenarios/README.md for the format).
 *
 * Build: gcc -shared -fPIC -o <dir>/libnvidia-ml.so.1 fake-nvml.c
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_UNKNOWN = 999,
};

/* Layouts as in nvml.h. */
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

/* nvmlProcessInfo_v2_t, which _v3 takes: 4 bytes of padding after pid, 24 in all. */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

#define MAX_CARDS 16
#define MAX_INSTANCES 16
#define MAX_PROCESSES 16
#define UNSET (-1LL)
#define NO_ID 0xFFFFFFFFu
#define MIB (1024ULL * 1024ULL)
#define MAGIC 0x6e766d6c

typedef struct {
  unsigned int pid;
  unsigned long long memory_mib;
  char name[64];
} fake_process;

typedef struct fake_device {
  int magic;
  int is_mig;
  struct fake_device *parent;
  char name[96];
  char uuid[96];
  char bus[32];
  long long memory_total_mib, memory_used_mib;
  long long temperature, power_mw, limit_mw, utilization, ecc;
  long long remapped[4]; /* corrected, uncorrected, pending, failure */
  long long retired[2];  /* multiple single-bit, double-bit */
  long long mig_current, mig_pending;
  /* A MIG device's own. */
  long long slot, gi, ci, gpu_slices, compute_slices, media;
  fake_process processes[MAX_PROCESSES];
  int process_count;
  struct fake_device *instances[MAX_INSTANCES];
  int instance_count;
} fake_device;

typedef fake_device *nvmlDevice_t;

static struct {
  int depth;
  char driver[80];
  int cuda;
  int init_result;
  fake_device cards[MAX_CARDS];
  int card_count;
  fake_device instances[MAX_CARDS * MAX_INSTANCES];
  int instance_count;
} state;

static void reset_device(fake_device *d) {
  memset(d, 0, sizeof *d);
  d->magic = MAGIC;
  d->temperature = d->power_mw = d->limit_mw = d->utilization = d->ecc = UNSET;
  d->remapped[0] = d->remapped[1] = d->remapped[2] = d->remapped[3] = UNSET;
  d->retired[0] = d->retired[1] = UNSET;
  d->mig_current = d->mig_pending = UNSET;
  d->slot = d->gi = d->ci = d->gpu_slices = d->compute_slices = UNSET;
  d->media = 0;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *end = s + strlen(s);
  while (end > s && isspace((unsigned char)end[-1])) *--end = '\0';
  return s;
}

static void copy_text(char *to, size_t size, const char *from) {
  snprintf(to, size, "%s", from);
}

/* "unsupported" (or nothing) leaves the field unset: the call answers NOT_SUPPORTED. */
static long long number(const char *value) {
  if (strcmp(value, "unsupported") == 0 || *value == '\0') return UNSET;
  return strtoll(value, NULL, 10);
}

static int numbers(const char *value, long long *out, int n) {
  const char *p = value;
  for (int i = 0; i < n; i++) {
    char *end;
    out[i] = strtoll(p, &end, 10);
    if (end == p) return 0;
    p = end;
  }
  return 1;
}

static int add_process(fake_device *d, const char *value) {
  if (d->process_count >= MAX_PROCESSES) return 0;
  fake_process *p = &d->processes[d->process_count++];
  char *end;
  p->pid = (unsigned int)strtoul(value, &end, 10);
  p->memory_mib = strtoull(end, &end, 10);
  copy_text(p->name, sizeof p->name, trim(end));
  return 1;
}

/* One `key = value` line of a [card] or [instance] section; 0 for a key it does not know. */
static int set_field(fake_device *d, const char *key, const char *value) {
  long long pair[2];
  if (strcmp(key, "name") == 0) copy_text(d->name, sizeof d->name, value);
  else if (strcmp(key, "uuid") == 0) copy_text(d->uuid, sizeof d->uuid, value);
  else if (strcmp(key, "bus") == 0) copy_text(d->bus, sizeof d->bus, value);
  else if (strcmp(key, "memory") == 0) {
    if (!numbers(value, pair, 2)) return 0;
    d->memory_total_mib = pair[0];
    d->memory_used_mib = pair[1];
  } else if (strcmp(key, "temperature") == 0) d->temperature = number(value);
  else if (strcmp(key, "power") == 0) d->power_mw = number(value);
  else if (strcmp(key, "limit") == 0) d->limit_mw = number(value);
  else if (strcmp(key, "utilization") == 0) d->utilization = number(value);
  else if (strcmp(key, "ecc") == 0) d->ecc = number(value);
  else if (strcmp(key, "remapped") == 0) {
    if (!numbers(value, d->remapped, 4)) return 0;
  } else if (strcmp(key, "retired") == 0) {
    if (!numbers(value, d->retired, 2)) return 0;
  } else if (strcmp(key, "mig") == 0) {
    if (!numbers(value, pair, 2)) return 0;
    d->mig_current = pair[0];
    d->mig_pending = pair[1];
  } else if (strcmp(key, "slot") == 0) d->slot = number(value);
  else if (strcmp(key, "ids") == 0) {
    if (!numbers(value, pair, 2)) return 0;
    d->gi = pair[0];
    d->ci = pair[1];
  } else if (strcmp(key, "slices") == 0) {
    if (!numbers(value, pair, 2)) return 0;
    d->gpu_slices = pair[0];
    d->compute_slices = pair[1];
  } else if (strcmp(key, "media") == 0) d->media = number(value);
  else if (strcmp(key, "process") == 0) return add_process(d, value);
  else return 0;
  return 1;
}

static int read_scenario(void) {
  const char *path = getenv("FAKE_NVML_SCENARIO");
  if (path == NULL || *path == '\0') {
    fprintf(stderr, "fake-nvml: FAKE_NVML_SCENARIO is not set\n");
    return 0;
  }
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "fake-nvml: cannot open %s\n", path);
    return 0;
  }
  memset(&state.cards, 0, sizeof state.cards);
  state.card_count = state.instance_count = 0;
  state.init_result = NVML_SUCCESS;
  state.cuda = 0;
  copy_text(state.driver, sizeof state.driver, "");
  fake_device *current = NULL;
  char buffer[512];
  int line = 0, ok = 1;
  while (ok && fgets(buffer, sizeof buffer, f) != NULL) {
    line++;
    char *hash = strchr(buffer, '#');
    if (hash != NULL) *hash = '\0';
    char *text = trim(buffer);
    if (*text == '\0') continue;
    if (strcmp(text, "[card]") == 0) {
      if (state.card_count >= MAX_CARDS) { ok = 0; break; }
      current = &state.cards[state.card_count++];
      reset_device(current);
      continue;
    }
    if (strcmp(text, "[instance]") == 0) {
      fake_device *card = state.card_count > 0 ? &state.cards[state.card_count - 1] : NULL;
      if (card == NULL || card->instance_count >= MAX_INSTANCES) { ok = 0; break; }
      current = &state.instances[state.instance_count++];
      reset_device(current);
      current->is_mig = 1;
      current->parent = card;
      card->instances[card->instance_count++] = current;
      continue;
    }
    char *eq = strchr(text, '=');
    if (eq == NULL) { ok = 0; break; }
    *eq = '\0';
    char *key = trim(text), *value = trim(eq + 1);
    if (current == NULL) {
      if (strcmp(key, "driver") == 0) copy_text(state.driver, sizeof state.driver, value);
      else if (strcmp(key, "cuda") == 0) state.cuda = (int)number(value);
      else if (strcmp(key, "init") == 0) state.init_result = (int)number(value);
      else ok = 0;
    } else {
      ok = set_field(current, key, value);
    }
  }
  fclose(f);
  if (!ok) fprintf(stderr, "fake-nvml: %s:%d: cannot read this line\n", path, line);
  return ok;
}

static int valid(nvmlDevice_t d) {
  return state.depth > 0 && d != NULL && d->magic == MAGIC;
}

static nvmlReturn_t put_text(char *to, unsigned int length, const char *text) {
  if (to == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(to, text, strlen(text) + 1);
  return NVML_SUCCESS;
}

static nvmlReturn_t put_unsigned(unsigned int *to, long long value) {
  if (to == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (value == UNSET) return NVML_ERROR_NOT_SUPPORTED;
  *to = (unsigned int)value;
  return NVML_SUCCESS;
}

/* A test's way to see that every nvmlInit_v2 was matched by an nvmlShutdown. */
int fake_nvml_init_depth(void) { return state.depth; }

nvmlReturn_t nvmlInit_v2(void) {
  if (state.depth == 0) {
    if (!read_scenario()) return NVML_ERROR_UNKNOWN;
    if (state.init_result != NVML_SUCCESS) return state.init_result;
  }
  state.depth++;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  if (state.depth == 0) return NVML_ERROR_UNINITIALIZED;
  state.depth--;
  return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  if (state.depth == 0) return NVML_ERROR_UNINITIALIZED;
  return put_text(version, length, state.driver);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
  if (state.depth == 0) return NVML_ERROR_UNINITIALIZED;
  if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *version = state.cuda;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  if (state.depth == 0) return NVML_ERROR_UNINITIALIZED;
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *count = (unsigned int)state.card_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  if (state.depth == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL || index >= (unsigned int)state.card_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &state.cards[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  if (!valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return put_text(name, length, device->name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
  if (!valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return put_text(uuid, length, device->uuid);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
  if (!valid(device) || pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  fake_device *card = device->is_mig ? device->parent : device;
  memset(pci, 0, sizeof *pci);
  unsigned int domain = 0, bus = 0, dev = 0;
  sscanf(card->bus, "%x:%x:%x", &domain, &bus, &dev);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = dev;
  pci->pciDeviceId = 0x233010de;
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", domain, bus, dev);
  copy_text(pci->busId, sizeof pci->busId, card->bus);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
  if (!valid(device) || memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = (unsigned long long)device->memory_total_mib * MIB;
  memory->used = (unsigned long long)device->memory_used_mib * MIB;
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

/* Heat and power are the card's; NVML answers them on the card's handle only here. */
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temperature) {
  if (!valid(device) || sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  return put_unsigned(temperature, device->temperature);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
  if (!valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  return put_unsigned(power, device->power_mw);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
  if (!valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  return put_unsigned(limit, device->limit_mw);
}

/* nvml.h: not supported on MIG-enabled GPUs, nor on MIG devices. */
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
  if (!valid(device) || utilization == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->is_mig || device->mig_current == 1 || device->utilization == UNSET) return NVML_ERROR_NOT_SUPPORTED;
  utilization->gpu = (unsigned int)device->utilization;
  utilization->memory = (unsigned int)(device->utilization / 2);
  return NVML_SUCCESS;
}

/* errorType 1 = uncorrected, counterType 1 = aggregate; corrected counts are always 0 here. */
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                         unsigned long long *count) {
  if (!valid(device) || count == NULL || errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (device->is_mig || device->ecc == UNSET) return NVML_ERROR_NOT_SUPPORTED;
  *count = errorType == 1 ? (unsigned long long)device->ecc : 0;
  return NVML_SUCCESS;
}

/* cause 0: multiple single-bit errors, 1: double-bit error. */
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, unsigned int *pageCount,
                                       unsigned long long *addresses) {
  if (!valid(device) || pageCount == NULL || cause < 0 || cause > 1) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->is_mig || device->retired[cause] == UNSET) return NVML_ERROR_NOT_SUPPORTED;
  unsigned int pages = (unsigned int)device->retired[cause];
  if (*pageCount < pages) {
    *pageCount = pages;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < pages && addresses != NULL; i++) addresses[i] = 0x1000ULL * (i + 1);
  *pageCount = pages;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                       unsigned int *isPending, unsigned int *failureOccurred) {
  if (!valid(device) || corrRows == NULL || uncRows == NULL || isPending == NULL || failureOccurred == NULL) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (device->is_mig || device->remapped[0] == UNSET) return NVML_ERROR_NOT_SUPPORTED;
  *corrRows = (unsigned int)device->remapped[0];
  *uncRows = (unsigned int)device->remapped[1];
  *isPending = (unsigned int)device->remapped[2];
  *failureOccurred = (unsigned int)device->remapped[3];
  return NVML_SUCCESS;
}

static void put_process(nvmlProcessInfo_t *to, const fake_process *p, unsigned int gi, unsigned int ci) {
  to->pid = p->pid;
  to->usedGpuMemory = p->memory_mib * MIB;
  to->gpuInstanceId = gi;
  to->computeInstanceId = ci;
}

/*
 * A card not in MIG mode: its processes, with no GI/CI. A MIG device: its own. A card in
 * MIG mode: those of all its instances, with their ids (what a privileged caller sees).
 */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos) {
  if (!valid(device) || infoCount == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlProcessInfo_t found[MAX_PROCESSES * (MAX_INSTANCES + 1)];
  unsigned int n = 0;
  if (device->is_mig) {
    for (int i = 0; i < device->process_count; i++) {
      put_process(&found[n++], &device->processes[i], (unsigned int)device->gi, (unsigned int)device->ci);
    }
  } else if (device->mig_current == 1) {
    for (int k = 0; k < device->instance_count; k++) {
      fake_device *m = device->instances[k];
      for (int i = 0; i < m->process_count; i++) {
        put_process(&found[n++], &m->processes[i], (unsigned int)m->gi, (unsigned int)m->ci);
      }
    }
  } else {
    for (int i = 0; i < device->process_count; i++) put_process(&found[n++], &device->processes[i], NO_ID, NO_ID);
  }
  if (*infoCount < n) {
    *infoCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (n > 0 && infos == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  memcpy(infos, found, n * sizeof *found);
  *infoCount = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
  if (state.depth == 0) return NVML_ERROR_UNINITIALIZED;
  fake_device *all[MAX_CARDS * (MAX_INSTANCES + 1)];
  int count = 0;
  for (int i = 0; i < state.card_count; i++) all[count++] = &state.cards[i];
  for (int i = 0; i < state.instance_count; i++) all[count++] = &state.instances[i];
  for (int d = 0; d < count; d++) {
    for (int i = 0; i < all[d]->process_count; i++) {
      if (all[d]->processes[i].pid == pid) return put_text(name, length, all[d]->processes[i].name);
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
  if (!valid(device) || currentMode == NULL || pendingMode == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->is_mig || device->mig_current == UNSET) return NVML_ERROR_NOT_SUPPORTED;
  *currentMode = (unsigned int)device->mig_current;
  *pendingMode = (unsigned int)device->mig_pending;
  return NVML_SUCCESS;
}

/* A maximum (7 on every MIG card so far), not how many exist: callers skip NOT_FOUND. */
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
  if (!valid(device) || count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->is_mig || device->mig_current == UNSET) return NVML_ERROR_NOT_SUPPORTED;
  *count = device->mig_current == 1 ? 7 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice) {
  if (!valid(device) || migDevice == NULL || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->mig_current != 1 || index >= 7) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < device->instance_count; i++) {
    if (device->instances[i]->slot == (long long)index) {
      *migDevice = device->instances[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
  if (!valid(device) || !device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  return put_unsigned(id, device->gi);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
  if (!valid(device) || !device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  return put_unsigned(id, device->ci);
}

/* Works only on MIG devices, as in NVML. */
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes) {
  if (!valid(device) || attributes == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (!device->is_mig || device->gpu_slices == UNSET) return NVML_ERROR_NOT_SUPPORTED;
  memset(attributes, 0, sizeof *attributes);
  attributes->multiprocessorCount = (unsigned int)(device->compute_slices * 16);
  attributes->sharedCopyEngineCount = (unsigned int)device->gpu_slices;
  attributes->sharedDecoderCount = device->media ? 1 : 0;
  attributes->sharedJpegCount = device->media ? 1 : 0;
  attributes->sharedOfaCount = device->media ? 1 : 0;
  attributes->gpuInstanceSliceCount = (unsigned int)device->gpu_slices;
  attributes->computeInstanceSliceCount = (unsigned int)device->compute_slices;
  attributes->memorySizeMB = (unsigned long long)device->memory_total_mib;
  return NVML_SUCCESS;
}
