#include "run_gate.hpp"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "cli.hpp"

namespace progcache::cli {
namespace {

constexpr int kMaxInterpreters = 4;  // scripts run by scripts: Linux's BINPRM_MAX_RECURSION

bool read_at(int fd, void *out, size_t size, off_t at) {
  return ::pread(fd, out, size, at) == ssize_t(size);
}

// What an image of this process's kind is: its ELF header's class, byte order and machine, and
// its program interpreter (the dynamic loader that reads LD_PRELOAD).
struct Kind {
  unsigned char elf_class = 0, data = 0;
  Elf64_Half machine = 0;
  std::string interpreter;
};

// The ELF's kind, or nullopt where it is not a 64-bit ELF program with an interpreter.
std::optional<Kind> kind_of(int fd) {
  Elf64_Ehdr eh;
  if (!read_at(fd, &eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 4096)
    return std::nullopt;
  for (Elf64_Half i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!read_at(fd, &ph, sizeof ph, off_t(eh.e_phoff + i * sizeof ph))) return std::nullopt;
    if (ph.p_type != PT_INTERP) continue;
    if (ph.p_filesz == 0 || ph.p_filesz > PATH_MAX) return std::nullopt;
    std::string interpreter(ph.p_filesz, '\0');
    if (!read_at(fd, interpreter.data(), interpreter.size(), off_t(ph.p_offset)))
      return std::nullopt;
    interpreter.resize(std::strlen(interpreter.c_str()));
    return Kind{eh.e_ident[EI_CLASS], eh.e_ident[EI_DATA], eh.e_machine, interpreter};
  }
  return std::nullopt;  // statically linked: no loader reads LD_PRELOAD
}

const std::optional<Kind> &own_kind() {
  static const std::optional<Kind> kind = [] {
    const OwnedFd self{::open("/proc/self/exe", O_RDONLY | O_CLOEXEC)};
    return self.fd >= 0 ? kind_of(self.fd) : std::nullopt;
  }();
  return kind;
}

bool same_kind(const Kind &a, const Kind &b) {
  return a.elf_class == b.elf_class && a.data == b.data && a.machine == b.machine &&
         a.interpreter == b.interpreter;
}

// The interpreter a "#!" line names (its first word), or "" where head holds none.
std::string script_interpreter(const char *head, size_t n) {
  if (n < 2 || head[0] != '#' || head[1] != '!') return "";
  size_t at = 2;
  while (at < n && (head[at] == ' ' || head[at] == '\t')) ++at;
  const size_t start = at;
  while (at < n && head[at] != ' ' && head[at] != '\t' && head[at] != '\n') ++at;
  return at < n ? std::string(head + start, at - start) : "";  // a line longer than head: none
}

bool first_image_runs_helper(const std::string &path, int depth) {
  const OwnedFd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat st;
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (st.st_mode & (S_ISUID | S_ISGID)) != 0)
    return false;
  // File capabilities make the exec secure, as setuid does: the loader then ignores LD_PRELOAD.
  if (::fgetxattr(f.fd, "security.capability", nullptr, 0) >= 0) return false;
  char head[PATH_MAX + 16];
  const ssize_t n = ::pread(f.fd, head, sizeof head, 0);
  if (n <= 0) return false;
  const std::string interpreter = script_interpreter(head, size_t(n));
  if (!interpreter.empty())
    return interpreter[0] == '/' && depth < kMaxInterpreters &&
           first_image_runs_helper(interpreter, depth + 1);
  const std::optional<Kind> kind = kind_of(f.fd);
  return kind && own_kind() && same_kind(*kind, *own_kind());
}

// The file posix_spawnp runs for argv0: argv0 itself when it holds a slash, else the first
// executable regular file of that name in $PATH's directories (the C library's default search
// where $PATH is unset; an empty entry is the working directory).
std::string resolve_command(const char *argv0) {
  if (std::strchr(argv0, '/')) return argv0;
  std::string search;
  if (const char *path = std::getenv("PATH")) {
    search = path;
  } else {
    char buf[256];
    const size_t n = ::confstr(_CS_PATH, buf, sizeof buf);
    search = n > 0 && n <= sizeof buf ? buf : "/bin:/usr/bin";
  }
  for (size_t at = 0; at <= search.size();) {
    const size_t colon = std::min(search.find(':', at), search.size());
    const std::string dir = search.substr(at, colon - at);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + argv0;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    at = colon + 1;
  }
  return "";
}

}  // namespace

bool command_runs_helper_first(const char *argv0) {
  if (::getauxval(AT_SECURE)) return false;  // a privileged run: nothing is left to chance
  const std::string path = resolve_command(argv0);
  return !path.empty() && first_image_runs_helper(path, 0);
}

bool Gate::open() {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return false;
  ours_ = ends[0];
  theirs_ = ends[1];
  // The helper checks that the descriptor it is told of is this socket (by its inode), so that
  // a process that closed it and opened something else under its number is never held.
  struct stat st;
  if (::fstat(theirs_, &st) != 0 || ::fcntl(theirs_, F_SETFD, 0) != 0) {
    const int error = errno;
    ::close(ours_);
    ::close(theirs_);
    ours_ = theirs_ = -1;
    errno = error;
    return false;
  }
  const std::string value = std::to_string(theirs_) + ":" + std::to_string(st.st_ino);
  ::setenv("PCACHE_RUN_GATE", value.c_str(), 1);
  return true;
}

void Gate::started() {
  ::unsetenv("PCACHE_RUN_GATE");
  if (theirs_ >= 0) ::close(theirs_);
  theirs_ = -1;
}

void Gate::let_through() {
  const char go = 'g';
  (void)::send(ours_, &go, 1, MSG_NOSIGNAL);  // a command that has died needs no word
  ::close(ours_);
  ours_ = -1;
}

bool Gate::stop(pid_t command) {
  // The helper says it waits as soon as it runs: a command that has not said so within a second
  // is not held (a security module made its start secure, say), and may be running.
  pollfd p{ours_, POLLIN, 0};
  char word = 0;
  int ready;
  do {
    ready = ::poll(&p, 1, 1000);
  } while (ready < 0 && errno == EINTR);
  const bool waiting = ready > 0 && ::recv(ours_, &word, 1, MSG_DONTWAIT) == 1 && word == 'w';
  ::kill(command, SIGKILL);
  ::close(ours_);
  ours_ = -1;
  return waiting;
}

Gate::~Gate() {
  if (ours_ >= 0) ::close(ours_);
  if (theirs_ >= 0) ::close(theirs_);
}

}  // namespace progcache::cli
