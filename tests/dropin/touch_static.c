/* A statically linked `touch FILE` for tests/dropin/dropin_test.sh: no dynamic loader reads its
 * LD_PRELOAD, so `progcache run` must check the cache before starting it (cli/run_gate.hpp). */
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  const int fd = open(argv[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  return fd >= 0 && close(fd) == 0 ? 0 : 1;
}
