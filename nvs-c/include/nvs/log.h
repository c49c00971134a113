/* NVStream's logging entry points (nvs/log.h), for its C++ Store API over libnvs:
 * init_log is accepted and does nothing (nvs reports failures through the return values
 * and nvs_last_error(), never through a log). LOG(severity) compiles to nothing, as in
 * NVStream's release builds. See store.h. */
#ifndef NVS_COMPAT_LOG_H
#define NVS_COMPAT_LOG_H

#include <iostream>
#include <string>

namespace nvs {
enum SeverityLevel { all, trace, debug, info, warning, error, fatal, off };

inline void init_log(SeverityLevel) {}
inline void init_log(SeverityLevel, std::string) {}
}

#ifndef LOG
#define LOG(severity) \
  if (0) std::cerr
#endif
#ifndef TRACE
#define TRACE() \
  {}
#endif

#endif
