/* dlclose() while a thread still holds the library's per-thread state, as an FFI host may do
 * (Python's ctypes, Julia's Libdl): the library's per-thread state is released when that thread
 * exits, after the handle was closed, so the library must still be mapped then (its release is
 * registered with __cxa_thread_atexit, which keeps the object loaded until every thread that
 * registered one has exited). Then the library is opened again and used: a fresh or the same
 * mapping, it must answer as before.
 *
 * Usage: dlclose_test PATH_TO_LIBPROGCACHE. Exit status 0 when every step behaved. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <progcache/progcache.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef pcache_status (*make_key_fn)(const pcache_program *, uint8_t *);
typedef pcache_status (*open_fn)(const char *, const pcache_options *, pcache **);
typedef pcache_status (*put_fn)(pcache *, const void *, size_t, const void *, size_t);
typedef pcache_status (*get_into_fn)(pcache *, const void *, size_t, void *, size_t, size_t *);
typedef pcache_status (*close_fn)(pcache *);
typedef const char *(*last_error_fn)(void);

struct api {
  make_key_fn make_key;
  open_fn open;
  put_fn put;
  get_into_fn get_into;
  close_fn close;
  last_error_fn last_error;
};

static int load(void *lib, struct api *a) {
  a->make_key = (make_key_fn)dlsym(lib, "pcache_make_key");
  a->open = (open_fn)dlsym(lib, "pcache_open");
  a->put = (put_fn)dlsym(lib, "pcache_put");
  a->get_into = (get_into_fn)dlsym(lib, "pcache_get_into");
  a->close = (close_fn)dlsym(lib, "pcache_close");
  a->last_error = (last_error_fn)dlsym(lib, "pcache_last_error");
  return a->make_key && a->open && a->put && a->get_into && a->close && a->last_error;
}

/* Every kind of per-thread state the library keeps: a key (digest contexts, kept fields, the
 * reused program description), a failed call (the thread's error string) and a cache's round
 * trip. Returns 0 when each call answered as documented. */
static int use(const struct api *a, const char *who) {
  static const char source[] = "__global__ void k(int *x) { *x = 1; }\n";
  const char *options[] = {"-arch=sm_90"};
  pcache_program p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.name = "k.cu";
  p.source = source;
  p.options = options;
  p.num_options = 1;
  uint8_t key[PCACHE_KEY_SIZE], again[PCACHE_KEY_SIZE];
  if (a->make_key(&p, key) != PCACHE_OK || a->make_key(&p, again) != PCACHE_OK ||
      memcmp(key, again, sizeof key) != 0) {
    fprintf(stderr, "%s: pcache_make_key: %s\n", who, a->last_error());
    return 1;
  }
  if (a->make_key(NULL, key) != PCACHE_ERR_INVALID_ARG || !*a->last_error()) {
    fprintf(stderr, "%s: a NULL program was not refused with a message\n", who);
    return 1;
  }
  pcache *c = NULL;
  char value[8];
  size_t size = 0;
  if (a->open("memory:", NULL, &c) != PCACHE_OK ||
      a->put(c, key, sizeof key, "payload", 7) != PCACHE_OK ||
      a->get_into(c, key, sizeof key, value, sizeof value, &size) != PCACHE_OK || size != 7 ||
      memcmp(value, "payload", 7) != 0 || a->close(c) != PCACHE_OK) {
    fprintf(stderr, "%s: memory cache round trip: %s\n", who, a->last_error());
    return 1;
  }
  return 0;
}

struct worker {
  const struct api *api;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int used, closed, failed;
};

static void *work(void *arg) {
  struct worker *w = arg;
  const int failed = use(w->api, "worker");
  pthread_mutex_lock(&w->lock);
  w->failed = failed;
  w->used = 1;
  pthread_cond_broadcast(&w->cond);
  while (!w->closed) pthread_cond_wait(&w->cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
  return NULL; /* the thread's state is released here, after the handle was closed */
}

/* Runs use() on a new thread that exits only after close_lib (when not NULL) was dlclose()d. */
static int on_a_thread(const struct api *a, void *close_lib) {
  struct worker w = {a, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
  pthread_t t;
  if (pthread_create(&t, NULL, work, &w) != 0) return 1;
  pthread_mutex_lock(&w.lock);
  while (!w.used) pthread_cond_wait(&w.cond, &w.lock);
  pthread_mutex_unlock(&w.lock);
  if (close_lib && dlclose(close_lib) != 0) {
    fprintf(stderr, "dlclose_test: dlclose: %s\n", dlerror());
    return 1;
  }
  pthread_mutex_lock(&w.lock);
  w.closed = 1;
  pthread_cond_broadcast(&w.cond);
  pthread_mutex_unlock(&w.lock);
  pthread_join(t, NULL);
  return w.failed;
}

static void *open_lib(const char *path, struct api *a) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib || !load(lib, a)) {
    fprintf(stderr, "dlclose_test: %s\n", lib ? "missing symbol" : dlerror());
    return NULL;
  }
  return lib;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: dlclose_test PATH_TO_LIBPROGCACHE\n");
    return 2;
  }
  struct api a;
  /* 1. Only a worker used the library; it exits after the handle is closed. */
  void *lib = open_lib(argv[1], &a);
  if (!lib || on_a_thread(&a, lib) != 0) return 1;
  /* 2. Opened again: this thread's state is made now, a new worker's too, which exits after
   * this handle too is closed; then opened a third time and used by this thread, whose state
   * was made under the handle before. It is released at exit, after the last close. */
  if (!(lib = open_lib(argv[1], &a)) || use(&a, "main, reopened") != 0) return 1;
  if (on_a_thread(&a, lib) != 0) return 1;
  if (!(lib = open_lib(argv[1], &a)) || use(&a, "main, opened a third time") != 0) return 1;
  if (dlclose(lib) != 0) return 1;
  printf("dlclose_test: per-thread state released after dlclose; reopened and used\n");
  return 0;
}
