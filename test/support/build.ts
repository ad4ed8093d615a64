// The trajectory builder lives in product code (the demo run uses it too); tests import it from here.
import type { Script } from '../../server/demo/build.ts';
export {
  buildTrajectory,
  trainingSample,
  type BuildMode,
  type Script,
  type ScriptTurn,
} from '../../server/demo/build.ts';

export const geometryScript = (id: string): Script => ({
  id,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'image', image: 'diagram.png' },
        { type: 'text', text: 'In the figure, AB = 3 and BC = 4. Find AC. Use the calculator tool.' },
      ],
    },
  ],
  images: [{ width: 640, height: 480 }],
  turns: [
    {
      answer:
        'I will compute the hypotenuse.\n<tool_call>\n{"name": "calc", "arguments": {"expr": "sqrt(3**2+4**2)"}}\n</tool_call>',
      observation: [{ role: 'tool', content: '5.0' }],
    },
    { answer: 'AC = 5.' },
  ],
});
