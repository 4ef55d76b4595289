// headroom's additions to tch's C API (vendor/torch-sys/README.md).
#include <ATen/Version.h>
#include <cstring>
#include <string>

extern "C" {
// libtorch's own configuration text (at::show_config(): "TORCH_VERSION=2.5.1, ..."), so that a binary
// can tell which libtorch it really loaded. Copies at most `len - 1` bytes and a NUL into `buf`;
// returns the text's full length, or -1 when libtorch threw.
long headroom_show_config(char *buf, long len) {
  try {
    std::string text = at::show_config();
    if (buf != nullptr && len > 0) {
      size_t n = text.size() < static_cast<size_t>(len - 1) ? text.size() : static_cast<size_t>(len - 1);
      std::memcpy(buf, text.data(), n);
      buf[n] = '\0';
    }
    return static_cast<long>(text.size());
  } catch (...) {
    return -1;
  }
}
}
