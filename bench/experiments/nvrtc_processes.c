// What a process pays to compile with NVRTC, and how programs compile at once in processes,
// forked children and threads (issue 5: prebuild's scaling with --jobs). No CUDA headers needed:
//
//   gcc -O2 bench/experiments/nvrtc_processes.c -o build/exp/nvrtc_processes -ldl -lpthread
//   build/exp/nvrtc_processes phases            dlopen, then three compiles, with rusage
//   build/exp/nvrtc_processes serial W C        W * C programs in a row, in this process
//   build/exp/nvrtc_processes MODE W C          the same programs in W workers of C each, MODE
//                                               exec (fresh processes), fork-cold (forked after
//                                               dlopen), fork-warm (after a compile), threads
//
// Each program holds 16 instantiations of one kernel, as kjit's prebuild batches them.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int (*create_t)(void **, const char *, const char *, int, const char **, const char **);
typedef int (*compile_t)(void *, int, const char **);
typedef int (*size_t_t)(void *, size_t *);
typedef int (*destroy_t)(void **);
static create_t create;
static compile_t compile;
static size_t_t cubin_size;
static destroy_t destroy;
static void *lib;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static void usage(const char *what, double t0) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  int threads = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d));)
    threads += e->d_name[0] != '.';
  if (d)
    closedir(d);
  printf("%-22s %7.1f ms  (process so far: user %.0f ms, sys %.0f ms, minflt %ld, threads %d)\n",
         what, (now() - t0) * 1e3, r.ru_utime.tv_sec * 1e3 + r.ru_utime.tv_usec / 1e3,
         r.ru_stime.tv_sec * 1e3 + r.ru_stime.tv_usec / 1e3, r.ru_minflt, threads);
}

static void load(void) {
  lib = dlopen("libnvrtc.so.13", RTLD_NOW);
  if (!lib)
    lib = dlopen("/usr/local/cuda/lib64/libnvrtc.so", RTLD_NOW);
  if (!lib) {
    printf("dlopen: %s\n", dlerror());
    exit(1);
  }
  create = (create_t)dlsym(lib, "nvrtcCreateProgram");
  compile = (compile_t)dlsym(lib, "nvrtcCompileProgram");
  cubin_size = (size_t_t)dlsym(lib, "nvrtcGetCUBINSize");
  destroy = (destroy_t)dlsym(lib, "nvrtcDestroyProgram");
}

// 16 kernels in one program, each a different specialisation, as kjit batches them.
static void compile_one(int seed) {
  char source[8192];
  int n =
      snprintf(source, sizeof source,
               "template <typename T, int N> __global__ void scale(T *x, T a) {\n"
               "  for (int i = threadIdx.x; i < N; i += blockDim.x) x[i] = x[i] * a + T(%d); }\n",
               seed);
  for (int k = 0; k < 16; ++k)
    n +=
        snprintf(source + n, sizeof source - n,
                 "template __global__ void scale<float, %d>(float *, float);\n", seed * 16 + k + 1);
  void *prog;
  const char *opts[] = {"--gpu-architecture=sm_90"};
  if (create(&prog, source, "p.cu", 0, NULL, NULL) != 0 || compile(prog, 1, opts) != 0) {
    printf("compile failed\n");
    exit(1);
  }
  size_t size;
  cubin_size(prog, &size);
  destroy(&prog);
}

static int per_worker;
static void *thread_main(void *arg) {
  long id = (long)arg;
  for (int i = 0; i < per_worker; ++i)
    compile_one((int)(id * 100 + i));
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "phases";
  int workers = argc > 2 ? atoi(argv[2]) : 16;
  per_worker = argc > 3 ? atoi(argv[3]) : 4;
  double t0 = now();
  if (!strcmp(mode, "phases")) {
    load();
    usage("dlopen", t0);
    t0 = now();
    compile_one(1);
    usage("first compile", t0);
    t0 = now();
    compile_one(2);
    usage("second compile", t0);
    {
      char line[512];
      FILE *maps = fopen("/proc/self/maps", "r");
      while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, ".so") && strstr(line, "r-xp"))
          printf("  maps: %s", strrchr(line, ' ') + 1);
      if (maps)
        fclose(maps);
      DIR *d = opendir("/proc/self/task");
      for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
          continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(comm, sizeof comm, f))
          printf("  thread %s: %s", e->d_name, comm);
        if (f)
          fclose(f);
      }
      if (d)
        closedir(d);
    }
    t0 = now();
    compile_one(3);
    usage("third compile", t0);
    return 0;
  }
  if (!strcmp(mode, "child")) { // workers is this child's id
    load();
    thread_main((void *)(long)workers);
    return 0;
  }
  if (!strcmp(mode, "serial")) { // one process, workers * per_worker compiles in a row
    load();
    for (long id = 0; id < workers; ++id)
      thread_main((void *)id); // the same programs as `exec workers per_worker`
    printf("serial %d compiles: %.3f s\n", workers * per_worker, now() - t0);
    return 0;
  }
  if (!strcmp(mode, "threads")) {
    load();
    compile_one(999); // warm
    double t1 = now();
    pthread_t t[64];
    for (long i = 0; i < workers; ++i)
      pthread_create(&t[i], NULL, thread_main, (void *)i);
    for (int i = 0; i < workers; ++i)
      pthread_join(t[i], NULL);
    printf("threads %d x %d: %.3f s (after load+warm %.3f s)\n", workers, per_worker, now() - t0,
           now() - t1);
    return 0;
  }
  // fork-warm: load and compile once, then fork; fork-cold: load only; exec: fresh processes.
  int warm = !strcmp(mode, "fork-warm");
  if (!strcmp(mode, "fork-warm") || !strcmp(mode, "fork-cold")) {
    load();
    if (warm)
      compile_one(999);
  }
  double t1 = now();
  for (int i = 0; i < workers; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      if (!strcmp(mode, "exec")) {
        char count[16];
        snprintf(count, sizeof count, "%d", per_worker);
        char id[16];
        snprintf(id, sizeof id, "%d", i);
        execl("/proc/self/exe", argv[0], "child", id, count, (char *)NULL);
        _exit(127);
      }
      if (!lib)
        load();
      thread_main((void *)(long)i);
      _exit(0);
    }
  }
  while (wait(NULL) > 0) {
  }
  printf("%s %d x %d: %.3f s (after parent's setup %.3f s)\n", mode, workers, per_worker,
         now() - t0, now() - t1);
  return 0;
}
