/* Device functions with structs: a particle struct loaded and stored whole, passed by value and through
 * pointers to its fields, returned from a function; a box struct made with a brace initializer; a
 * default argument; a __forceinline__ helper. Particles bounce inside the unit square. */

struct Particle {
    float x, y;
    float vx, vy;
    int bounces;
};

struct Box {
    float lo, hi;
};

__device__ __forceinline__ float clampf(float v, float lo, float hi)
{
    return fminf(fmaxf(v, lo), hi);
}

__device__ void reflect(float *pos, float *vel, struct Box box, int *bounces)
{
    if (*pos < box.lo) {
        *pos = 2.0f * box.lo - *pos;
        *vel = -*vel;
        ++*bounces;
    } else if (*pos > box.hi) {
        *pos = 2.0f * box.hi - *pos;
        *vel = -*vel;
        ++*bounces;
    }
}

__device__ Particle step(Particle p, float dt, Box box, float drag = 1.0f)
{
    p.x += p.vx * dt;
    p.y += p.vy * dt;
    reflect(&p.x, &p.vx, box, &p.bounces);
    reflect(&p.y, &p.vy, box, &p.bounces);
    p.x = clampf(p.x, box.lo, box.hi);
    p.y = clampf(p.y, box.lo, box.hi);
    p.vx *= drag;
    p.vy *= drag;
    return p;
}

extern "C" __global__ void moveParticles(Particle *ps, int n, float dt, int steps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    Box box = {0.0f, 1.0f};
    Particle p = ps[i];
    p.bounces = 0;
    for (int s = 0; s < steps; ++s)
        p = (s % 4 == 3) ? step(p, dt, box, 0.75f) : step(p, dt, box);
    ps[i] = p;
}
