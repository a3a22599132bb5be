/* The floor of a process that starts and does nothing (bench/fresh_process.py: `progcache
 * version` against it). */
int main(void) {
  return 0;
}
