/* The floor of a fresh process's hit: read a binary from a file, write it to another, exit.
 * Usage: read_write IN OUT */
#include <stdio.h>

int main(int argc, char **argv) {
  static char buf[16 << 20];
  if (argc != 3) return 2;
  FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
  if (!in || !out) return 1;
  const size_t n = fread(buf, 1, sizeof buf, in);
  return fwrite(buf, 1, n, out) == n && fclose(out) == 0 && fclose(in) == 0 ? 0 : 1;
}
