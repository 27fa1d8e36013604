// expect: parameter 'threadIdx': the name is a CUDA built-in
void f(int n,
       float threadIdx[n], // <- error
       float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    b[i] = threadIdx[i];
#pragma endscop
}
