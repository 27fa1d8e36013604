#include "_fake_defines.h"
#define M_E 2.7182818284590452354
#define M_PI 3.14159265358979323846
#define M_SQRT2 1.41421356237309504880
#define HUGE_VAL (1e300 * 1e300)
#define INFINITY (1e300f * 1e300f)
#define NAN (0.0f / 0.0f)
double sqrt(double); float sqrtf(float);
double exp(double); float expf(float);
double exp2(double); float exp2f(float);
double log(double); float logf(float);
double log2(double); float log2f(float);
double log10(double); float log10f(float);
double pow(double, double); float powf(float, float);
double fabs(double); float fabsf(float);
double fmin(double, double); float fminf(float, float);
double fmax(double, double); float fmaxf(float, float);
double fma(double, double, double); float fmaf(float, float, float);
double floor(double); float floorf(float);
double ceil(double); float ceilf(float);
double round(double); float roundf(float);
double fmod(double, double); float fmodf(float, float);
double sin(double); float sinf(float);
double cos(double); float cosf(float);
double tan(double); float tanf(float);
double asin(double); double acos(double); double atan(double); double atan2(double, double);
double sinh(double); double cosh(double);
double tanh(double); float tanhf(float);
double erf(double); float erff(float);
