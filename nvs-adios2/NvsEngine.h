/* nvs-adios2: an ADIOS2 (>= 2.12, plugin interface v2) engine over nvs's C ABI.
 *
 * Writer: BeginStep ... Put ... EndStep is one nvs_put_batch (one commit): every variable
 * put in the step is an object named as the variable, version step+1, metadata
 * "dtype=<numpy typestr>\nshape=d0,d1,...\n"; the batch ends with the step's index object
 * "__adios2_step" (version step+1) listing "name\tdtype\tshape" per variable.
 * Reader: follows the pool (nvs_follower_*); a step is there once its index object is,
 * and since the batch is one commit a reader never sees part of a step.
 *
 * Modes: Write starts a new pool (an existing file at PoolPath is replaced, as BP5
 * replaces its output: the new pool is made beside it and renamed over it, so a Write
 * that fails leaves the old pool whole; a reader of the old one gets an error saying it
 * was replaced; never while a live writer holds it: refused); Append opens the pool (or creates it) and continues after the last
 * committed step; Read follows the pool as a stream.
 *
 * Parameters (engine type="Plugin", PluginName="nvs", PluginLibrary="nvs_adios2"),
 * checked before anything on disk changes:
 *   PoolPath     the pool file (required; the path given to Open is not used)
 *   PoolSize     a new pool's size in bytes, suffixes K/M/G/T (writer; default 256M)
 *   EndStream    writer Close: true (default) ends the stream, false detaches
 *                (followers wait for a restarted writer); true/false, on/off, yes/no, 1/0
 *   Timeout      reader: seconds BeginStep waits when called without a timeout
 *                (default -1; negative or inf: as long as it takes; a dead writer is an
 *                error anyway)
 *   OpenTimeout  reader: seconds Open waits for the pool file to appear or be formatted
 *                (default 60; negative or inf: as long as it takes); a file that is
 *                there and is not a pool is an error at once
 *
 * Not offered: span puts, several blocks of a local array in one step, operators (errors
 * at the Put), attributes (an error at EndStep: not stored), several writer processes of
 * one pool (a Write or Append over a pool a live writer holds is refused). Memory
 * selections and a block selection made after a box selection are not shown to a plugin
 * engine by the plugin interface (2.12): a Put or Get with one acts as if it had none.
 * AvailableVariables lists every variable the stream has had, not only the current
 * step's (a Get of one the step lacks is an error naming the step).
 */
#ifndef NVS_ADIOS2_NVSENGINE_H_
#define NVS_ADIOS2_NVSENGINE_H_

#include <adios2/plugin/PluginEngineInterface.h>

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "nvs.h"

namespace nvs_adios2
{

/** One variable of one step: its numpy dtype, global shape and bytes (row-major). */
struct StepVar
{
    std::string dtype;
    adios2::Dims shape;
    size_t elemSize = 0;
    std::vector<char> data;
    bool loaded = false; // reader: data read from the pool
};

class NvsEngine : public adios2::plugin::PluginEngineInterface
{
public:
    NvsEngine(adios2::IO io, const std::string &name, const adios2::Mode mode);
    ~NvsEngine() override;

    adios2::StepStatus BeginStep(adios2::StepMode mode, const float timeoutSeconds = -1.0f) override;
    void EndStep() override;
    size_t CurrentStep() const override;
    void PerformPuts() override {}
    void PerformGets() override {}
    void DoClose(const int transportIndex = -1) override;

#define declare(T)                                                                                 \
    void DoPutSync(adios2::Variable<T> variable, const T *values) override;                        \
    void DoPutDeferred(adios2::Variable<T> variable, const T *values) override;                    \
    void DoGetSync(adios2::Variable<T> variable, T *values) override;                              \
    void DoGetDeferred(adios2::Variable<T> variable, T *values) override;                          \
    void DoGetSync(adios2::Variable<T> variable, T *values, const adios2::core::Selection &sel)    \
        override;                                                                                  \
    void DoGetDeferred(adios2::Variable<T> variable, T *values,                                    \
                       const adios2::core::Selection &sel) override;
    ADIOS2_FOREACH_STDTYPE_1ARG(declare)
#undef declare

#define declare(T)                                                                                 \
    void DoPut(adios2::Variable<T> variable, typename adios2::Variable<T>::Span &span,             \
               const bool initialize, const T &value) override;
    ADIOS2_FOREACH_PRIMITIVE_STDTYPE_1ARG(declare)
#undef declare

private:
    bool m_Writer = false;
    bool m_InStep = false;
    bool m_Closed = false;
    bool m_EndStream = true;
    size_t m_Step = 0;      // the current (or next) step
    bool m_AnyStep = false; // reader: a step was begun
    std::string m_PoolPath;
    double m_Timeout = -1;     // seconds; negative: as long as it takes
    double m_OpenTimeout = 60; // seconds; negative: as long as it takes
    dev_t m_Dev = 0;           // reader: the followed file (a Write replaces PoolPath's)
    ino_t m_Ino = 0;

    nvs_pool *m_Pool = nullptr;         // writer
    nvs_follower *m_Follower = nullptr; // reader
    std::vector<std::string> m_Order;   // the step's variables, in put order
    std::map<std::string, StepVar> m_Vars;

    std::string Param(const std::string &key, const std::string &def) const;
    void OpenWriter();
    void OpenReader();
    void DefineReadVariables();
    template <class T>
    void Put(adios2::Variable<T> &variable, const T *values);
    template <class T>
    void Get(adios2::Variable<T> &variable, T *values, const adios2::Dims &start,
             const adios2::Dims &count);
    template <class T>
    void GetVar(adios2::Variable<T> &variable, T *values);
    template <class T>
    void GetSel(adios2::Variable<T> &variable, T *values, const adios2::core::Selection &sel);
};

} // namespace nvs_adios2

#endif
